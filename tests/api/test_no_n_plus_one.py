"""Listing instances with their nested fields costs a fixed number of SQL statements.

The count is exact: only the statements issued while serving the one GraphQL request are
counted (those run in the request's context: the test's task and the tasks it spawns,
marked by a context variable), never those of the background tasks sharing the engine
(outbox relay, ticker, automation, group commit). Each counted request starts with an
empty viewer cache, so each pays the same authentication statements whatever the
cache's TTL did meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from graph_stack import Api, loan
from sqlalchemy import event

from stateward.runtime.ticker import Ticker

#: True in the context of the request being counted (inherited by the tasks it spawns).
SERVING: ContextVar[bool] = ContextVar("serving_counted_request", default=False)

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
    """Record the SQL statements executed in the context of the block (the request it
    serves), not those of background tasks running meanwhile on the same engine."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if SERVING.get():
            seen.append(statement)

    target = api.runtime.engine.sync_engine
    event.listen(target, "before_cursor_execute", record)
    token = SERVING.set(True)
    try:
        yield seen
    finally:
        SERVING.reset(token)
        event.remove(target, "before_cursor_execute", record)


async def _make(api: Api, count: int) -> None:
    for _ in range(count):
        inst = await api.ok('mutation{startInstance(workflow:"acme/loans/loan"){id}}')
        await api.ok(
            'mutation($i:ID!){performAction(instance:$i,action:"submit",'
            "input:{fields:{amount:5}}){duplicate}}",
            {"i": inst["startInstance"]["id"]},
        )


async def _statements(api: Api, n: int) -> int:
    api.services.viewers.clear()  # every counted request authenticates (same statements)
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
    ticker = Ticker(api.runtime, interval=0.01)  # busy background work on the same engine
    ticker.start()
    try:
        await _statements(api, 5)  # warm the definition cache once
        few = await _statements(api, 5)
        many = await _statements(api, 50)
    finally:
        await ticker.stop()
    assert many == few, f"5 instances: {few} statements, 50 instances: {many}"
    assert few <= 20
