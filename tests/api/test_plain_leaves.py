"""Plain leaf fields completed directly (`stateward/schema/leaves.py`, issue 16) give the
same bytes as graphql-core's own completion: the events query with aliases, fragments and
`@include`/`@skip`; and, on a small schema, every case that must take graphql-core's path
(a null leaf, null on a non-null field, values a scalar refuses, awaitables, enum members,
resolvers, a resolve extension)."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import strawberry
from graph_stack import Api, loan
from strawberry.extensions import SchemaExtension
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from stateward.schema import leaves
from stateward.schema.base import JSON, PerEventExecutionContext, build_schema
from stateward.settings import Settings

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
START = "mutation($w:String!){startInstance(workflow:$w){instanceId}}"
PERFORM = """mutation($i:ID!,$a:String!,$in:JSON){performAction(instance:$i,action:$a,input:$in)
  { event { seq } }}"""
EVENTS = """query Events($p: ID!, $sig: Boolean!, $noHash: Boolean!) {
  events(process: $p, first: 10) {
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { cursor node { ...Ev } }
    nodes {
      __typename n: seq seq processId
      ... on Event { action actor ts at: recordedAt }
      signature @include(if: $sig)
      hash @skip(if: $noHash)
      prevHash input envelope id seq
      ...Ev
    }
  }
  first: events(process: $p, first: 1) { nodes { seq prev: prevHash } }
}
fragment Ev on Event { id seq workflow signer nonce prevHash input hash @include(if: $sig) }"""


@pytest.fixture
def stock(api: Api) -> Iterator[Any]:
    """A way to run the served schema with graphql-core's own completion of every field."""
    schema = api.app.state.schema
    assert schema.execution_context_class is PerEventExecutionContext

    class Stock:
        def __enter__(self) -> None:
            schema.execution_context_class = StrawberryGraphQLCoreExecutionContext

        def __exit__(self, *exc: object) -> None:
            schema.execution_context_class = PerEventExecutionContext

    yield Stock()
    schema.execution_context_class = PerEventExecutionContext


async def _raw(api: Api, query: str, variables: dict[str, Any]) -> bytes:
    headers = {"Authorization": f"Bearer {api.admin_token}"}
    response = await api.client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=headers
    )
    assert response.status_code == 200, response.text
    return response.content


async def test_the_events_query_is_byte_identical_to_graphql_cores_completion(
    api: Api, stock: Any
) -> None:
    assert leaves.SUPPORTED  # the installed graphql-core takes the fast path
    event = api.app.state.schema._schema.type_map["Event"]
    plain = {name for name, f in event.fields.items() if leaves._plain_leaf(f, ()) is not None}
    assert plain == set(event.fields)  # every field of Event is a plain leaf
    await api.ok(DEPLOY, {"d": loan()})
    pid = (await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]["instanceId"]
    await api.ok(PERFORM, {"i": pid, "a": "submit", "in": {"fields": {"amount": 7}}})
    for variables in (
        {"p": pid, "sig": True, "noHash": False},
        {"p": pid, "sig": False, "noHash": True},
    ):
        fast = await _raw(api, EVENTS, variables)
        with stock:
            reference = await _raw(api, EVENTS, variables)
        assert fast == reference
        body = json.loads(fast)
        assert "errors" not in body
        nodes = body["data"]["events"]["nodes"]
        assert len(nodes) == 2 and nodes[1]["n"] == 2 and nodes[0]["__typename"] == "Event"
        assert nodes[1]["input"] == {"fields": {"amount": 7}}
        assert ("signature" in nodes[0]) is variables["sig"]
        assert ("hash" in nodes[0]) is variables["sig"] or not variables["noHash"]
    # a request error (an unknown process) reads the same too, but for its request id
    missing = {"p": "00000000-0000-0000-0000-000000000000", "sig": True, "noHash": False}
    fast = await _raw(api, EVENTS, missing)
    with stock:
        reference = await _raw(api, EVENTS, missing)
    assert _without_request_id(fast) == _without_request_id(reference)
    assert json.loads(fast)["errors"][0]["extensions"]["code"] == "NOT_FOUND"


def _without_request_id(content: bytes) -> bytes:
    body = json.loads(content)
    for error in body["errors"]:
        error["extensions"].pop("requestId")
    return json.dumps(body).encode()


@strawberry.enum
class Colour(enum.Enum):
    RED = "red"


async def _later() -> str:
    return "awaited"


@strawberry.type
class Item:
    name: str
    note: str | None
    count: int
    ratio: float
    data: JSON
    when: datetime
    colour: Colour
    later: str

    @strawberry.field
    def loud(self) -> str:
        return self.name.upper()


@strawberry.type
class Holder:
    items: list[Item | None]


def _item(**changes: Any) -> Item:
    values: dict[str, Any] = {
        "name": "a", "note": None, "count": 1, "ratio": 0.5, "data": {"k": [1, None]},
        "when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "colour": Colour.RED,
        "later": "now",
    }  # fmt: skip
    values.update(changes)
    return Item(**values)


@strawberry.type
class Query:
    @strawberry.field
    def holder(self) -> Holder:
        bad: list[Item | None] = [
            _item(),
            _item(name=None),  # null on a non-null field: the item becomes null
            _item(count="x"),  # a value Int refuses
            _item(count=2**40),  # out of Int's range
            _item(note=7),  # String accepts an int
            _item(later=_later()),  # an awaitable in a plain attribute
            _item(data=_later()),  # ... of the JSON scalar, which would pass it through
            _item(data=Colour.RED),  # not a plain type: JSON passes it through as is
        ]
        return Holder(items=bad)


LEAVES = """{ holder { items { name n: note count ratio data when colour later loud
  ... on Item { name count } } } }"""


class Shouting(SchemaExtension):
    """A resolve hook: it must see (and may change) every field, plain or not."""

    def resolve(self, _next: Any, root: Any, info: Any, *args: Any, **kwargs: Any) -> Any:
        value = _next(root, info, *args, **kwargs)
        return value.upper() if isinstance(value, str) else value


async def _both(extensions: tuple[Any, ...] = ()) -> tuple[Any, Any]:
    results = []
    for stock in (False, True):
        schema = build_schema(Query, settings=Settings(), extensions=extensions)
        if stock:
            schema.execution_context_class = StrawberryGraphQLCoreExecutionContext
        result = await schema.execute(LEAVES)
        data = json.dumps(result.data, default=repr)
        errors = [
            (e.message, e.path, [(loc.line, loc.column) for loc in e.locations or ()])
            for e in result.errors or ()
        ]
        results.append((data, errors))
    return results[0], results[1]


async def test_values_a_plain_leaf_cannot_take_go_through_graphql_core() -> None:
    fast, reference = await _both()
    assert fast == reference
    data, errors = fast
    items = json.loads(data)["holder"]["items"]
    assert items[0]["name"] == "a" and items[0]["n"] is None and items[0]["colour"] == "RED"
    assert items[1] is None and items[2] is None and items[3] is None  # non-null errors
    assert items[4]["n"] == "7" and items[5]["later"] == "awaited"
    assert items[6]["data"] == "awaited"
    assert [e[1] for e in errors] == [
        ["holder", "items", 1, "name"],
        ["holder", "items", 2, "count"],
        ["holder", "items", 3, "count"],
    ]


async def test_a_resolve_extension_sees_every_field() -> None:
    fast, reference = await _both((Shouting,))
    assert fast == reference
    assert json.loads(fast[0])["holder"]["items"][0]["name"] == "A"
