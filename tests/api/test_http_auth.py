"""Bearer-token authentication of HTTP requests through `services.authenticate`."""

from __future__ import annotations

import httpx
from api_app import make_app

WHOAMI = {"query": "{ whoami }"}
GOOD = {"Authorization": "Bearer good-token"}


async def test_a_valid_bearer_token_sets_the_viewer(client: httpx.AsyncClient):
    response = await client.post("/graphql", json=WHOAMI, headers=GOOD)
    assert response.json() == {"data": {"whoami": "alice"}}


async def test_the_scheme_is_matched_case_insensitively(client: httpx.AsyncClient):
    headers = {"Authorization": "bearer good-token"}
    response = await client.post("/graphql", json=WHOAMI, headers=headers)
    assert response.json() == {"data": {"whoami": "alice"}}


async def test_no_token_means_an_anonymous_viewer(client: httpx.AsyncClient):
    response = await client.post("/graphql", json=WHOAMI)
    assert response.json() == {"data": {"whoami": None}}


async def test_a_refused_token_is_401_unauthenticated(client: httpx.AsyncClient):
    response = await client.post("/graphql", json=WHOAMI, headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    error = response.json()["errors"][0]
    assert error["message"] == "invalid or expired token"
    assert error["extensions"] == {"code": "UNAUTHENTICATED"}


async def test_a_non_bearer_authorization_is_401(client: httpx.AsyncClient):
    response = await client.post("/graphql", json=WHOAMI, headers={"Authorization": "Basic eDp5"})
    assert response.status_code == 401
    assert response.json()["errors"][0]["message"] == "Authorization must be 'Bearer <token>'"


async def test_without_an_authenticate_hook_the_viewer_is_none():
    app = make_app(object())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        response = await c.post("/graphql", json=WHOAMI, headers={"Authorization": "Bearer x"})
    assert response.json() == {"data": {"whoami": None}}
