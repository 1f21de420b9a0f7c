"""Subscription events do not accumulate in the subscription's executor (issue 11).

graphql-core 3.3 runs each event on a shallow copy of the subscription's executor, whose
sub-field memo is keyed by a per-event list it keeps alive: with the stock executor the
memo grows by one entry per delivered event for the life of the subscription.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator

import strawberry
from graphql import parse
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from stateward.schema.base import PerEventExecutionContext, build_schema
from stateward.settings import Settings


@strawberry.type
class Item:
    n: int
    tags: list[str]


@strawberry.type
class Query:
    ok: bool = True


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def items(self) -> AsyncGenerator[Item]:  # pragma: no cover - not iterated here
        yield Item(n=0, tags=[])


SCHEMA = build_schema(Query, subscription=Subscription, settings=Settings())
DOCUMENT = parse("subscription { items { n tags } }")


async def _deliver(executor_class: type, events: int) -> int:
    """Run `events` per-event executions; the size of the subscription's memo after."""
    executor = executor_class.build(SCHEMA._schema, DOCUMENT)
    for n in range(events):
        result = executor.build_per_event_executor(Item(n=n, tags=["a"]))
        result = result.execute_operation()
        if inspect.isawaitable(result):
            result = await result
        assert result.errors is None and result.data == {"items": {"n": n, "tags": ["a"]}}
    return len(executor._relevant_sub_fields)


async def test_the_served_schema_keeps_no_memo_per_event() -> None:
    assert SCHEMA.execution_context_class is PerEventExecutionContext
    assert await _deliver(PerEventExecutionContext, 200) == 0


async def test_the_stock_executor_grew_one_entry_per_event() -> None:
    assert await _deliver(StrawberryGraphQLCoreExecutionContext, 200) == 200
