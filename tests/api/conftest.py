"""Fixtures for the API infrastructure tests (test schema lives in api_app.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from api_app import FakeServices, make_app
from graph_stack import api  # noqa: F401  (the real stack for the schema tests)
from starlette.applications import Starlette


@pytest.fixture
def services() -> FakeServices:
    return FakeServices()


@pytest.fixture
def app(services: FakeServices) -> Starlette:
    return make_app(services)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            yield c
