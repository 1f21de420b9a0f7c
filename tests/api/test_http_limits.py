"""Transport-level limits on /graphql: GET, batching, depth, aliases, tokens."""

from __future__ import annotations

import httpx
from api_app import make_app


async def test_body_under_the_limit_is_served(client: httpx.AsyncClient):
    response = await client.post("/graphql", json={"query": "{ hello }"})
    assert response.status_code == 200
    assert response.json() == {"data": {"hello": "hello world"}}


async def test_queries_are_allowed_over_get(client: httpx.AsyncClient):
    response = await client.get("/graphql", params={"query": '{ hello(name: "get") }'})
    assert response.json() == {"data": {"hello": "hello get"}}


async def test_mutations_are_refused_over_get(client: httpx.AsyncClient):
    response = await client.get("/graphql", params={"query": "mutation { echo(value: 1) }"})
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["message"] == "mutations are not allowed when using GET"
    assert error["extensions"]["code"] == "BAD_REQUEST"


async def test_mutations_work_over_post(client: httpx.AsyncClient):
    response = await client.post(
        "/graphql", json={"query": 'mutation { echo(value: {a: [1, "x"]}) }'}
    )
    assert response.json() == {"data": {"echo": {"a": [1, "x"]}}}


async def test_batched_requests_are_refused(client: httpx.AsyncClient):
    response = await client.post("/graphql", json=[{"query": "{ hello }"}] * 2)
    assert response.status_code == 400
    assert response.json()["errors"][0]["message"] == "Batching is not enabled"


async def test_methods_other_than_get_and_post_are_refused(client: httpx.AsyncClient):
    response = await client.put("/graphql", json={"query": "{ hello }"})
    assert response.status_code == 405
    assert response.json()["errors"][0]["extensions"]["code"] == "METHOD_NOT_ALLOWED"


async def test_a_query_deeper_than_the_limit_is_refused(client: httpx.AsyncClient):
    query = "{ " + "nested { " * 13 + "leaf" + " }" * 13 + " }"
    response = await client.post("/graphql", json={"query": query})
    body = response.json()
    assert body["data"] is None
    assert "exceeds maximum operation depth of 12" in body["errors"][0]["message"]
    assert body["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"


async def test_a_query_within_the_depth_limit_runs(client: httpx.AsyncClient):
    query = "{ " + "nested { " * 10 + "leaf" + " }" * 10 + " }"
    response = await client.post("/graphql", json={"query": query})
    assert "errors" not in response.json()


async def test_too_many_aliases_are_refused(client: httpx.AsyncClient):
    query = "{ " + " ".join(f"a{i}: hello" for i in range(31)) + " }"
    response = await client.post("/graphql", json={"query": query})
    error = response.json()["errors"][0]
    assert error["message"] == "31 aliases found. Allowed: 30"
    assert error["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"


async def test_too_many_tokens_are_refused(client: httpx.AsyncClient):
    query = "{ " + " ".join("hello" for _ in range(5001)) + " }"
    response = await client.post("/graphql", json={"query": query})
    error = response.json()["errors"][0]
    assert "Document contains more than 5000 tokens" in error["message"]
    assert error["extensions"]["code"] == "GRAPHQL_PARSE_FAILED"


async def test_limits_can_be_tightened_through_settings():
    app = make_app(extra={"graphql_max_depth": 2})
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        response = await c.post(
            "/graphql", json={"query": "{ nested { nested { nested { leaf } } } }"}
        )
    assert "exceeds maximum operation depth of 2" in response.json()["errors"][0]["message"]


async def test_a_syntax_error_has_a_parse_failed_code(client: httpx.AsyncClient):
    response = await client.post("/graphql", json={"query": "{ hello"})
    error = response.json()["errors"][0]
    assert error["message"].startswith("Syntax Error")
    assert error["extensions"]["code"] == "GRAPHQL_PARSE_FAILED"
