"""Liveness and readiness probes, and the lifespan that starts/stops services."""

from __future__ import annotations

import asyncio

import httpx
from api_app import FakeServices, make_app


def _client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_healthz_says_ok(client: httpx.AsyncClient):
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_is_ready_when_started_and_services_agree(client: httpx.AsyncClient):
    response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready"}


async def test_readyz_is_503_before_the_lifespan_started():
    async with _client(make_app()) as c:
        response = await c.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "starting"}


async def test_readyz_is_503_when_services_are_not_ready():
    services = FakeServices(is_ready=False)
    app = make_app(services)
    async with app.router.lifespan_context(app), _client(app) as c:
        response = await c.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable"}


class BrokenServices:
    async def ready(self) -> bool:
        raise ConnectionRefusedError("database down")


class DetailedServices:
    async def ready(self) -> dict[str, bool]:
        return {"database": True, "bus": False}


async def test_readyz_is_503_when_the_readiness_check_raises():
    app = make_app(BrokenServices())
    async with app.router.lifespan_context(app), _client(app) as c:
        response = await c.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "error": "ConnectionRefusedError"}


async def test_readyz_reports_each_named_check():
    app = make_app(DetailedServices())
    async with app.router.lifespan_context(app), _client(app) as c:
        response = await c.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": True, "bus": False}


async def test_readyz_without_a_readiness_hook_is_ready_once_started():
    app = make_app(object())
    async with app.router.lifespan_context(app), _client(app) as c:
        response = await c.get("/readyz")
    assert response.status_code == 200


async def test_lifespan_starts_and_stops_services_and_readyz_follows():
    services = FakeServices()
    app = make_app(services)
    async with app.router.lifespan_context(app):
        assert services.calls == ["start"]
    assert services.calls == ["start", "stop"]
    async with _client(app) as c:
        response = await c.get("/readyz")
    assert response.json() == {"status": "stopping"}


async def test_nothing_starts_at_construction_time():
    services = FakeServices()
    make_app(services)
    await asyncio.sleep(0)
    assert services.calls == []
