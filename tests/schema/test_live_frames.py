"""Live frames (issue 18): a subscription run with a `LiveOperation` in its context sends
the `next` frame of a shareable root itself — its `{"data": …}` JSON encoded once per
(event, document, variables) — and declines a root it can't share or whose result has
errors, which then goes through Strawberry (masked, coded) as before."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable, Callable

import pytest
import strawberry

from stateward.schema import base
from stateward.schema.base import LIVE_OPERATION, LiveOperation, PerEventExecutionContext
from stateward.settings import Settings


@strawberry.type
class Item:
    n: int
    shared_frame: strawberry.Private[bool] = True

    @strawberry.field
    def boom(self) -> int:
        raise ValueError("secret detail")


@strawberry.type
class Query:
    ok: bool = True


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def items(self) -> AsyncGenerator[Item]:  # pragma: no cover - not iterated here
        yield Item(n=0)


SCHEMA = base.build_schema(Query, subscription=Subscription, settings=Settings())


def _live(op_id: str, sent: list[str], query: str) -> LiveOperation:
    """A LiveOperation whose executor is the one a subscription of `query` builds (the
    served schema parses through a cache, so one document text is one document)."""
    live = LiveOperation(op_id, _collect(sent))
    token = LIVE_OPERATION.set(live)
    try:
        executor = PerEventExecutionContext.build(SCHEMA._schema, base.parse_cache(64)(query))
    finally:
        LIVE_OPERATION.reset(token)
    assert live.executor is executor  # the subscription's executor registered itself
    return live


def _collect(sent: list[str]) -> Callable[[str], Awaitable[None]]:
    async def send_text(frame: str) -> None:
        sent.append(frame)

    return send_text


async def test_one_encoding_per_event_and_document_for_every_subscriber(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoded = 0
    dumps = base._dumps

    def counted(value: object) -> str:
        nonlocal encoded
        encoded += 1
        return dumps(value)

    monkeypatch.setattr(base, "_dumps", counted)
    sent: list[str] = []
    query = "subscription { items { n } }"
    subscribers = [_live(str(k), sent, query) for k in range(3)]
    other: list[str] = []  # another document: executed and encoded apart
    apart = _live("9", other, "subscription { items { __typename n } }")
    event = Item(n=7)
    encoded = 0
    for live in subscribers:
        assert await live.send(event)
    assert encoded == 1
    frames = [json.loads(f) for f in sent]
    assert frames == [
        {"id": str(k), "type": "next", "payload": {"data": {"items": {"n": 7}}}} for k in range(3)
    ]
    assert await apart.send(event)
    assert encoded == 2
    assert json.loads(other[0])["payload"] == {"data": {"items": {"__typename": "Item", "n": 7}}}


async def test_a_root_that_is_not_shareable_or_a_result_with_errors_is_declined() -> None:
    sent: list[str] = []

    @strawberry.type
    class Private:
        n: int

    live = _live("1", sent, "subscription { items { n boom } }")
    assert not await live.send(Item(n=1))  # the field raised: Strawberry masks it
    assert not await live.send(Private(n=1))  # no `shared_frame`
    assert sent == []


async def test_no_live_operation_without_an_executor() -> None:
    sent: list[str] = []
    assert not await LiveOperation("1", _collect(sent)).send(Item(n=1))
    assert sent == []
