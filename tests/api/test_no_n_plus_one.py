"""Listing instances with their nested fields costs a fixed number of SQL statements."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from graph_stack import Api, loan
from sqlalchemy import event

LIST = """query($n:Int!){ instances(first:$n) { edges { node {
  id status data
  workflow { path version hash }
  state { key label ordinal }
  assignments { edges { node { team status } } }
  lastEvents(count: 3) { seq action actor }
  availableActions { key }
  parent { id }
} } } }"""


@contextmanager
def counting(api: Api) -> Iterator[list[str]]:
    """Record every SQL statement the engine executes inside the block."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    target = api.runtime.engine.sync_engine
    event.listen(target, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(target, "before_cursor_execute", record)


async def _make(api: Api, count: int) -> None:
    for _ in range(count):
        inst = await api.ok('mutation{startInstance(workflow:"acme/loans/loan"){id}}')
        await api.ok(
            'mutation($i:String!){performAction(instance:$i,action:"submit",'
            "input:{fields:{amount:5}}){duplicate}}",
            {"i": inst["startInstance"]["id"]},
        )


async def _statements(api: Api, n: int) -> int:
    with counting(api) as seen:
        data = await api.ok(LIST, {"n": n})
    edges = data["instances"]["edges"]
    assert len(edges) == n
    assert all(len(e["node"]["lastEvents"]) == 2 for e in edges)
    assert all(e["node"]["assignments"]["edges"][0]["node"]["team"] == "analyst" for e in edges)
    return len(seen)


async def test_listing_50_instances_costs_as_many_statements_as_listing_5(api: Api) -> None:
    await api.ok("mutation($d:JSON!){addWorkflow(definition:$d){id}}", {"d": loan()})
    await _make(api, 50)
    assert api.services.relay is not None
    await api.services.relay.stop()  # its background marking would be counted too
    await _statements(api, 5)  # warm the definition cache once
    few = await _statements(api, 5)
    many = await _statements(api, 50)
    assert many == few, f"5 instances: {few} statements, 50 instances: {many}"
    assert few <= 20
