"""A bounded, seeded fuzz run over the live schema (issue 9, "How it is checked"):
hypothesis-graphql generates valid queries and mutations (and, in negative mode,
operations with one schema violation) from the served SDL; the real app answers each over
HTTP, as the operator and anonymously. No answer may be a 5xx or carry INTERNAL_ERROR.
"""

from __future__ import annotations

from typing import Any

import graphql
from graph_stack import Api
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_graphql import Mode, from_schema
from hypothesis_graphql import nodes as gql_nodes

FUZZ = settings(
    max_examples=150,
    derandomize=True,  # seeded: the same examples on every run
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)

_json_leaf = st.one_of(
    st.integers(-1000, 1000).map(gql_nodes.Int),
    st.text(max_size=8).map(gql_nodes.String),
    st.booleans().map(gql_nodes.Boolean),
)
CUSTOM_SCALARS = {
    "JSON": st.one_of(
        _json_leaf,
        st.dictionaries(st.from_regex(r"[a-z]{1,5}", fullmatch=True), _json_leaf, max_size=3).map(
            lambda d: graphql.ObjectValueNode(
                fields=tuple(
                    graphql.ObjectFieldNode(name=graphql.NameNode(value=k), value=v)
                    for k, v in d.items()
                )
            )
        ),
    ),
    "DateTime": st.sampled_from(["2026-01-01T00:00:00Z", "not a date", ""]).map(gql_nodes.String),
}


def sdl(api: Api) -> str:
    return graphql.print_schema(api.app.state.schema._schema)


async def check(api: Api, query: str, token: str | None) -> None:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    response = await api.client.post("/graphql", json={"query": query}, headers=headers)
    assert response.status_code < 500, (query, response.text[:500])
    body: dict[str, Any] = response.json()
    codes = [e.get("extensions", {}).get("code") for e in body.get("errors") or []]
    assert "INTERNAL_ERROR" not in codes, (query, body["errors"])
    assert None not in codes, (query, body["errors"])  # every error has a stable code


@FUZZ
@given(data=st.data())
async def test_valid_operations_never_fail_internally(api: Api, data: st.DataObject):
    query = data.draw(from_schema(sdl(api), custom_scalars=CUSTOM_SCALARS))
    await check(api, query, api.admin_token)


@FUZZ
@given(data=st.data())
async def test_invalid_operations_are_client_errors(api: Api, data: st.DataObject):
    strategy = from_schema(sdl(api), custom_scalars=CUSTOM_SCALARS, mode=Mode.NEGATIVE)
    query = data.draw(strategy)
    await check(api, query, api.admin_token)


@settings(FUZZ, max_examples=60)
@given(data=st.data())
async def test_anonymous_operations_never_fail_internally(api: Api, data: st.DataObject):
    query = data.draw(from_schema(sdl(api), custom_scalars=CUSTOM_SCALARS))
    await check(api, query, None)
