"""Error policy (codes, problems, masking) and the production introspection switch."""

from __future__ import annotations

import httpx
from api_app import Mutation, Query, make_app

from stateward.domain.errors import DomainError, Problem
from stateward.schema.base import Limits, build_schema, parse_cache, validation_cache
from stateward.schema.errors import ApiError, to_graphql_error
from stateward.settings import Settings

INTROSPECTION = "{ __schema { queryType { name } } }"


async def _post(app, query: str) -> dict:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        return (await c.post("/graphql", json={"query": query})).json()


async def test_a_domain_error_carries_its_code_and_problems(client: httpx.AsyncClient):
    body = (await client.post("/graphql", json={"query": "{ refuse }"})).json()
    error = body["errors"][0]
    assert error["message"] == "2 validation error(s)"
    assert error["path"] == ["refuse"]
    assert error["extensions"] == {
        "code": "INVALID_DEFINITION",
        "problems": [
            {"code": "MISSING_FIELD", "message": "path is required", "pointer": "/path"},
            {"code": "UNKNOWN_STATE", "message": "no such state", "pointer": "/actions/0/to"},
        ],
    }


async def test_an_unexpected_error_is_masked_outside_debug(client: httpx.AsyncClient):
    body = (await client.post("/graphql", json={"query": "{ boom }"})).json()
    error = body["errors"][0]
    assert error["message"] == "Unexpected error."
    assert error["extensions"] == {"code": "INTERNAL_ERROR"}
    assert "secret" not in str(body)


async def test_an_unexpected_error_is_shown_in_debug_mode():
    body = await _post(make_app(debug=True), "{ boom }")
    error = body["errors"][0]
    assert error["message"] == "secret database password in this message"
    assert error["extensions"]["code"] == "INTERNAL_ERROR"


async def test_domain_errors_survive_next_to_masked_ones(client: httpx.AsyncClient):
    query = "{ hello maybeMissing maybeBroken }"
    body = (await client.post("/graphql", json={"query": query})).json()
    assert body["data"] == {"hello": "hello world", "maybeMissing": None, "maybeBroken": None}
    by_path = {e["path"][0]: e for e in body["errors"]}
    assert by_path["maybeMissing"]["extensions"] == {"code": "NOT_FOUND"}
    assert by_path["maybeMissing"]["message"] == "no such thing"
    assert by_path["maybeBroken"]["extensions"] == {"code": "INTERNAL_ERROR"}
    assert by_path["maybeBroken"]["message"] == "Unexpected error."


def test_to_graphql_error_builds_code_pointer_and_problems():
    err = DomainError(
        "INVALID_INPUT", "bad input", pointer="/amount", problems=[Problem("X", "y", "/z")]
    )
    formatted = to_graphql_error(err).formatted
    assert formatted["message"] == "bad input"
    assert formatted["extensions"] == {
        "code": "INVALID_INPUT",
        "pointer": "/amount",
        "problems": [{"code": "X", "message": "y", "pointer": "/z"}],
    }


def test_an_api_error_is_a_domain_error_with_a_stable_code():
    err = ApiError("UNAUTHENTICATED", "who are you?")
    assert isinstance(err, DomainError)
    assert to_graphql_error(err).formatted["extensions"] == {"code": "UNAUTHENTICATED"}


async def test_introspection_is_on_in_development(client: httpx.AsyncClient):
    body = (await client.post("/graphql", json={"query": INTROSPECTION})).json()
    assert body == {"data": {"__schema": {"queryType": {"name": "Query"}}}}


async def test_introspection_is_off_in_production():
    body = await _post(make_app(mode="production"), INTROSPECTION)
    error = body["errors"][0]
    assert "introspection has been disabled" in error["message"]
    assert error["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"


async def test_field_suggestions_are_hidden_in_production():
    dev = await _post(make_app(), "{ helo }")
    prod = await _post(make_app(mode="production"), "{ helo }")
    assert "Did you mean" in dev["errors"][0]["message"]
    assert prod["errors"][0]["message"] == "Cannot query field 'helo' on type 'Query'."


async def test_repeated_documents_hit_the_validation_cache():
    limits = Limits(cache_size=77)
    schema = build_schema(Query, Mutation, settings=Settings(), limits=limits)
    cache, parsed = validation_cache(77), parse_cache(77)
    before, parsed_before = cache.cache_info().hits, parsed.cache_info().hits
    for _ in range(5):
        result = await schema.execute("{ hello nested { leaf } }")
        assert result.errors is None
    assert cache.cache_info().hits - before >= 4
    assert parsed.cache_info().hits - parsed_before >= 4


async def test_a_syntax_error_still_gets_its_code_through_the_parse_cache():
    """A failed cached parse defers to Strawberry's own parse, so the error policy runs."""
    schema = build_schema(Query, Mutation, settings=Settings(), limits=Limits(cache_size=78))
    for _ in range(2):
        result = await schema.execute("{ hello ")
        assert result.errors is not None
        assert result.errors[0].extensions == {"code": "GRAPHQL_PARSE_FAILED"}
