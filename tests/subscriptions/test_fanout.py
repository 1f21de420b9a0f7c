"""Local fan-out: filtering, bounded queues, slow consumers dropped with a reason."""

from __future__ import annotations

import asyncio

import pytest

from stateward.subscriptions.fanout import (
    BUS_STOPPED,
    SLOW_CONSUMER,
    Fanout,
    SubscriptionClosed,
)


def _event(i: int, namespace: str = "acme") -> dict:
    return {"id": str(i), "type": "workflow.started", "namespace": namespace}


async def test_each_subscriber_gets_only_what_its_filter_accepts():
    fanout = Fanout()
    acme = fanout.subscribe(lambda p: p["namespace"] == "acme")
    everyone = fanout.subscribe()
    for i, ns in enumerate(["acme", "other", "acme"]):
        fanout.dispatch(_event(i, ns))
    assert [acme.pending, everyone.pending] == [2, 3]
    assert (await anext(acme))["id"] == "0"
    assert (await anext(acme))["id"] == "2"


async def test_a_subscriber_whose_queue_overflows_is_dropped_as_slow_consumer():
    fanout = Fanout()
    slow = fanout.subscribe(maxsize=3)
    fast = fanout.subscribe(maxsize=100)
    for i in range(4):
        fanout.dispatch(_event(i))
    assert slow.closed and slow.closed_reason == SLOW_CONSUMER
    assert slow.pending == 1  # buffered payloads freed; only the end marker is left
    assert len(fanout) == 1, "the slow subscriber no longer receives anything"
    with pytest.raises(SubscriptionClosed) as ended:
        await anext(slow)
    assert ended.value.code == SLOW_CONSUMER
    assert fast.pending == 4 and not fast.closed


async def test_memory_stays_bounded_however_many_messages_arrive():
    fanout = Fanout()
    stalled = fanout.subscribe(maxsize=10)
    for i in range(10_000):
        fanout.dispatch(_event(i))
    assert stalled.pending <= 10


async def test_closing_ends_iteration_normally():
    fanout = Fanout()
    sub = fanout.subscribe()
    fanout.dispatch(_event(1))
    sub.close()
    assert [p async for p in sub] == []
    assert sub.closed_reason is None
    assert len(fanout) == 0


async def test_a_waiting_consumer_is_woken_when_the_node_stops():
    fanout = Fanout()
    sub = fanout.subscribe()
    waiter = asyncio.create_task(anext(sub))
    await asyncio.sleep(0)
    fanout.close_all()
    with pytest.raises(SubscriptionClosed) as ended:
        await waiter
    assert ended.value.code == BUS_STOPPED


async def test_a_filter_that_raises_drops_only_its_subscriber():
    fanout = Fanout()
    broken = fanout.subscribe(lambda p: p["missing"])
    fine = fanout.subscribe()
    fanout.dispatch(_event(1))
    assert broken.closed_reason == "FILTER_FAILED"
    assert fine.pending == 1


def test_a_queue_must_have_a_positive_bound():
    with pytest.raises(ValueError):
        Fanout().subscribe(maxsize=0)


async def test_take_now_handles_payloads_only_while_the_consumer_is_idle():
    """The fan-out hands a payload to `take_now` only while the consumer waits with
    nothing queued; otherwise it is queued, so the consumer sees everything in bus order."""
    fanout = Fanout()
    sub = fanout.subscribe()
    taken: list[str] = []

    def take(payload: dict) -> bool:
        taken.append(payload["id"])
        return payload["id"] != "2"  # declines "2": it must be queued

    sub.take_now(take)
    fanout.dispatch(_event(0))  # nobody is waiting yet: queued
    assert taken == [] and sub.pending == 1
    assert (await anext(sub))["id"] == "0"

    waiting = asyncio.ensure_future(anext(sub))
    await asyncio.sleep(0)  # the consumer now waits, nothing queued
    fanout.dispatch(_event(1))  # taken at once
    fanout.dispatch(_event(2))  # declined: queued, the consumer wakes for it
    fanout.dispatch(_event(3))  # "2" is still queued: "3" must queue behind it
    assert taken == ["1", "2"] and sub.taken_now == 1
    assert (await waiting)["id"] == "2"
    assert (await anext(sub))["id"] == "3"

    busy = asyncio.ensure_future(anext(sub))
    await asyncio.sleep(0)
    sub.take_now(None)
    fanout.dispatch(_event(4))  # no hook: queued
    assert (await busy)["id"] == "4" and taken == ["1", "2"]


async def test_a_take_now_that_raises_queues_the_payload():
    fanout = Fanout()
    sub = fanout.subscribe()

    def broken(payload: dict) -> bool:
        raise RuntimeError("boom")

    sub.take_now(broken)
    waiting = asyncio.ensure_future(anext(sub))
    await asyncio.sleep(0)
    fanout.dispatch(_event(7))
    assert (await waiting)["id"] == "7" and not sub.closed


async def test_a_slow_consumer_is_still_dropped_when_take_now_declines():
    fanout = Fanout()
    sub = fanout.subscribe(maxsize=2)
    sub.take_now(lambda payload: False)  # e.g. the socket is not writable
    waiting = asyncio.ensure_future(anext(sub))
    await asyncio.sleep(0)
    for i in range(4):
        fanout.dispatch(_event(i))
    assert sub.closed and sub.closed_reason == SLOW_CONSUMER
    with pytest.raises(SubscriptionClosed):  # its buffered payloads were freed
        await waiting
