"""OutboxRelay on a real database (SQLite and PostgreSQL) and the memory:// bus.

The relay publishes committed rows, republishes rows a crashed node left unpublished,
and hands local subscribers every row once, in cursor order, filling gaps from the outbox.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from stateward.governance.keys import generate_keypair
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings
from stateward.subscriptions.bus import EventBus
from stateward.subscriptions.fanout import LocalSubscription
from stateward.subscriptions.relay import OutboxRelay


@pytest.fixture
async def runtime(db_url: str) -> AsyncIterator[Runtime]:
    """A runtime on a fresh database."""
    rt = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    yield rt
    await rt.close()


@pytest.fixture
async def bus() -> AsyncIterator[EventBus]:
    """A started memory:// bus."""
    b = EventBus("memory://")
    yield b
    await b.stop()


async def _write(runtime: Runtime, count: int, *, age: float = 0.0) -> list[dict[str, Any]]:
    """Commit `count` outbox rows (created `age` seconds ago) without publishing them."""
    created = datetime.now(UTC) - timedelta(seconds=age)
    async with runtime.uow() as uow:
        rows = [
            uow.outbox.stage(
                "workflow.updated",
                {"namespace": "acme", "instanceId": f"i{n}"},
                created,
                namespace="acme",
            )
            for n in range(count)
        ]
        await uow.commit()
    return [r.sequenced().message() for r in rows]


async def _take(sub: LocalSubscription, count: int) -> list[int]:
    got = []
    async with asyncio.timeout(10):
        async for payload in sub:
            got.append(int(payload["id"]))
            if len(got) == count:
                return got
    return got


async def _unpublished(runtime: Runtime) -> list[int]:
    async with runtime.uow(readonly=True) as uow:
        return [r.id for r in await uow.outbox.unpublished()]


async def test_committed_messages_are_published_and_marked_published(
    runtime: Runtime, bus: EventBus
) -> None:
    relay = OutboxRelay(runtime, bus, flush_interval=3600)
    await relay.start()
    await bus.start()
    sub = bus.subscribe()
    try:
        messages = await _write(runtime, 3)
        await runtime.publish(messages)
        assert await _take(sub, 3) == [m["id"] for m in messages]
        assert await relay.flush() == 3
        assert await _unpublished(runtime) == []
    finally:
        await relay.stop()


async def test_rows_left_unpublished_by_a_crash_are_republished_by_the_sweep(
    runtime: Runtime, bus: EventBus
) -> None:
    relay = OutboxRelay(runtime, bus, sweep_interval=3600, grace=5)
    await relay.start()
    await bus.start()
    sub = bus.subscribe()
    try:
        old = await _write(runtime, 2, age=60)  # committed, never published: a crash
        young = await _write(runtime, 1)  # just committed: its node may still publish it
        assert await relay.sweep() == 2
        assert await _take(sub, 2) == [m["id"] for m in old]
        assert await _unpublished(runtime) == [young[0]["id"]]
        assert await relay.sweep() == 0  # not yet `grace` old
    finally:
        await relay.stop()


async def test_the_sweep_reads_whole_rows_only_for_those_left_unpublished_too_long(
    runtime: Runtime, bus: EventBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under write load the rows a sweep finds unpublished are nearly all fresh (published,
    their marks not flushed yet): it reads their ids and times, and the payloads of the
    stale ones only (decoding every one was ~3 % of a busy event loop)."""
    from stateward.persistence import outbox

    decoded: list[int] = []
    record = outbox._record

    def counting(row: Any) -> Any:
        decoded.append(int(row.id))
        return record(row)

    monkeypatch.setattr(outbox, "_record", counting)
    relay = OutboxRelay(runtime, bus, sweep_interval=3600, flush_interval=3600, grace=5)
    await relay.start()
    await bus.start()
    sub = bus.subscribe()
    try:
        old = await _write(runtime, 2, age=60)
        fresh = await _write(runtime, 30)
        await runtime.publish(fresh[:20])  # published, marks not flushed yet
        assert await _take(sub, 2) != []  # (the relay fills 1..2 before the fresh ones)
        decoded.clear()
        assert await relay.sweep() == 2
        assert decoded == [m["id"] for m in old]
        assert await relay.flush() == 20  # (the sweep marked its own two)
        assert await _unpublished(runtime) == [m["id"] for m in fresh[20:]]
    finally:
        await relay.stop()


async def test_out_of_order_messages_reach_subscribers_in_cursor_order_without_gaps(
    runtime: Runtime, bus: EventBus
) -> None:
    relay = OutboxRelay(runtime, bus, sweep_interval=3600)
    await relay.start()
    await bus.start()
    sub = bus.subscribe()
    try:
        messages = await _write(runtime, 4)
        ids = [m["id"] for m in messages]
        await bus.publish(messages[3])  # a later id first: 1..3 are read from the outbox
        await bus.publish(messages[0])  # already delivered: dropped
        assert await _take(sub, 4) == ids
        await bus.publish(messages[3])  # a republished duplicate: dropped
        more = await _write(runtime, 1)
        await bus.publish(more[0])
        assert await _take(sub, 1) == [more[0]["id"]]
        assert relay.filled == 3
    finally:
        await relay.stop()


async def test_catch_up_after_a_reconnect_delivers_every_row_after_the_cursor(
    runtime: Runtime, bus: EventBus
) -> None:
    relay = OutboxRelay(runtime, bus, sweep_interval=3600)
    await relay.start()
    await bus.start()
    sub = bus.subscribe()
    try:
        missed = await _write(runtime, 3)  # published while this node was cut off
        relay.catch_up()
        assert await _take(sub, 3) == [m["id"] for m in missed]
        assert relay.cursor == missed[-1]["id"]
    finally:
        await relay.stop()


async def test_a_relay_starts_after_the_rows_that_already_exist(
    runtime: Runtime, bus: EventBus
) -> None:
    before = await _write(runtime, 2)
    async with runtime.uow() as uow:  # published before this node started
        await uow.outbox.mark_published([m["id"] for m in before], datetime.now(UTC))
        await uow.commit()
    relay = OutboxRelay(runtime, bus, sweep_interval=3600)
    await relay.start()
    await bus.start()
    sub = bus.subscribe()
    try:
        assert relay.cursor == before[-1]["id"]
        await bus.publish(before[0])  # history is the subscribers' `after:` replay
        fresh = await _write(runtime, 1)
        await bus.publish(fresh[0])
        assert await _take(sub, 1) == [fresh[0]["id"]]
    finally:
        await relay.stop()


async def test_a_restarted_relay_delivers_what_a_crashed_node_never_published(
    runtime: Runtime, bus: EventBus
) -> None:
    published = await _write(runtime, 1)
    async with runtime.uow() as uow:
        await uow.outbox.mark_published([published[0]["id"]], datetime.now(UTC))
        await uow.commit()
    orphans = await _write(runtime, 2, age=60)  # committed, then the node crashed
    relay = OutboxRelay(runtime, bus, sweep_interval=0.05, grace=1.0)
    await relay.start()
    await bus.start()
    sub = bus.subscribe()  # a live subscriber (no `after`) of the restarted node
    try:
        assert relay.cursor == published[0]["id"]
        assert await _take(sub, 2) == [m["id"] for m in orphans]
    finally:
        await relay.stop()
