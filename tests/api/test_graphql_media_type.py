"""GraphQL over HTTP media types: `application/graphql-response+json` vs legacy JSON.

A client whose `Accept` prefers `application/graphql-response+json` gets that content
type; a request that fails before execution (parse, validation, variable coercion) is
then a 400 without `data`. An error during execution stays a 200 with `data`. Clients
asking for `application/json` (or nothing) keep the 200 answers they always had.
"""

from __future__ import annotations

import httpx
import pytest

MODERN = {"accept": "application/graphql-response+json, application/json;q=0.9"}
LEGACY = {"accept": "application/json"}


async def post(client: httpx.AsyncClient, body: object, headers: dict[str, str]):
    return await client.post("/graphql", json=body, headers=headers)


async def test_a_modern_client_gets_the_graphql_response_media_type(client: httpx.AsyncClient):
    response = await post(client, {"query": "{ hello }"}, MODERN)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/graphql-response+json")
    assert response.json() == {"data": {"hello": "hello world"}}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"query": "{"}, "GRAPHQL_PARSE_FAILED"),
        ({"query": "{ nope }"}, "GRAPHQL_VALIDATION_FAILED"),
        (
            {"query": "query Q($n: String!) { hello(name: $n) }", "variables": {"n": 1}},
            "GRAPHQL_VALIDATION_FAILED",
        ),
    ],
    ids=["parse", "validation", "variable-coercion"],
)
async def test_a_request_failing_before_execution_is_a_400_without_data(
    client: httpx.AsyncClient, body: object, code: str
):
    response = await post(client, body, MODERN)
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/graphql-response+json")
    payload = response.json()
    assert "data" not in payload
    assert payload["errors"][0]["extensions"]["code"] == code

    legacy = await post(client, body, LEGACY)
    assert legacy.status_code == 200
    assert legacy.headers["content-type"].startswith("application/json")
    assert legacy.json()["data"] is None
    assert legacy.json()["errors"][0]["extensions"]["code"] == code


async def test_an_error_during_execution_stays_a_200_with_data(client: httpx.AsyncClient):
    response = await post(client, {"query": "{ hello refuse }"}, MODERN)
    assert response.status_code == 200
    payload = response.json()
    assert "data" in payload and payload["errors"]


async def test_json_preferred_over_graphql_response_keeps_json(client: httpx.AsyncClient):
    headers = {"accept": "application/json, application/graphql-response+json;q=0.5"}
    response = await post(client, {"query": "{"}, headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
