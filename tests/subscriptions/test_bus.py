"""EventBus against memory://, the real Redis and the real PostgreSQL.

Redis/PostgreSQL tests read STATEWARD_TEST_REDIS_URL / STATEWARD_TEST_POSTGRES_URL and
skip when unset. Each test uses its own channel (random suffix) on the shared servers, and
an outage is simulated by killing only this bus's own connection.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from redis import asyncio as aioredis

from stateward.subscriptions.bus import (
    BusUnavailable,
    EventBus,
    MessageTooLarge,
)
from stateward.subscriptions.fanout import BUS_STOPPED, SLOW_CONSUMER, SubscriptionClosed
from stateward.subscriptions.postgres_backend import (
    NotifyPayloadTooLarge,
    PostgresNotifyBackend,
    asyncpg_dsn,
)

REDIS_URL = os.environ.get("STATEWARD_TEST_REDIS_URL")
POSTGRES_URL = os.environ.get("STATEWARD_TEST_POSTGRES_URL")

needs_redis = pytest.mark.skipif(not REDIS_URL, reason="STATEWARD_TEST_REDIS_URL is not set")
needs_postgres = pytest.mark.skipif(
    not POSTGRES_URL, reason="STATEWARD_TEST_POSTGRES_URL is not set"
)

BACKENDS = [
    pytest.param("memory://", id="memory"),
    pytest.param(REDIS_URL or "redis://unset", id="redis", marks=[needs_redis, pytest.mark.redis]),
    pytest.param(
        POSTGRES_URL or "postgres://unset",
        id="postgres",
        marks=[needs_postgres, pytest.mark.postgres],
    ),
]


def _payload(i: int, **extra: object) -> dict:
    return {
        "id": str(i),
        "type": "workflow.advanced",
        "namespace": "acme",
        "workflow": "acme/orders",
        "instanceId": "00000000-0000-0000-0000-000000000001",
        **extra,
    }


def _suffix() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
async def make_bus() -> AsyncIterator:
    buses: list[EventBus] = []

    async def factory(url: str, **kwargs: object) -> EventBus:
        kwargs.setdefault("channel", f"stateward.test.{_suffix()}")
        bus = EventBus(url, backoff_initial=0.05, backoff_max=0.5, **kwargs)  # type: ignore[arg-type]
        await bus.start()
        buses.append(bus)
        return bus

    yield factory
    for bus in buses:
        await bus.stop()


async def _take(sub, n: int, timeout: float = 5.0) -> list:
    async def collect() -> list:
        return [await anext(sub) for _ in range(n)]

    return await asyncio.wait_for(collect(), timeout)


@pytest.mark.parametrize("url", BACKENDS)
async def test_published_payloads_reach_every_matching_local_subscriber(make_bus, url):
    bus = await make_bus(url)
    everything = bus.subscribe()
    only_two = bus.subscribe(lambda p: p["id"] == "2")
    for i in range(3):
        await bus.publish(_payload(i))
    assert [p["id"] for p in await _take(everything, 3)] == ["0", "1", "2"]
    assert [p["id"] for p in await _take(only_two, 1)] == ["2"]


@pytest.mark.parametrize("url", BACKENDS)
async def test_a_message_is_decoded_once_per_node_not_per_subscriber(make_bus, url):
    bus = await make_bus(url)
    subs = [bus.subscribe() for _ in range(25)]
    await bus.publish(_payload(7))
    received = [(await _take(s, 1))[0] for s in subs]
    assert bus.decoded == 1
    assert all(r is received[0] for r in received), "one decoded dict shared by all"


@pytest.mark.parametrize("url", BACKENDS)
async def test_a_slow_subscriber_is_disconnected_with_a_reason(make_bus, url):
    bus = await make_bus(url)
    slow = bus.subscribe(maxsize=5)
    keeping_up = bus.subscribe(maxsize=1000)
    for i in range(20):
        await bus.publish(_payload(i))
    assert len(await _take(keeping_up, 20)) == 20
    assert slow.closed_reason == SLOW_CONSUMER
    with pytest.raises(SubscriptionClosed) as ended:
        await anext(slow)
    assert ended.value.code == SLOW_CONSUMER


@pytest.mark.parametrize("url", BACKENDS)
async def test_two_nodes_on_one_channel_see_each_others_events(make_bus, url):
    if url.startswith("memory"):
        pytest.skip("memory:// is a single-node bus by design")
    channel = f"stateward.test.{_suffix()}"
    node_a = await make_bus(url, channel=channel)
    node_b = await make_bus(url, channel=channel)
    sub_b = node_b.subscribe()
    await node_a.publish(_payload(1))
    assert (await _take(sub_b, 1))[0]["id"] == "1"


@pytest.mark.parametrize("url", BACKENDS)
async def test_concurrent_publishes_all_arrive(make_bus, url):
    bus = await make_bus(url)
    sub = bus.subscribe()
    await asyncio.gather(*(bus.publish(_payload(i)) for i in range(50)))
    assert sorted(int(p["id"]) for p in await _take(sub, 50)) == list(range(50))


async def test_an_oversized_message_is_refused_before_it_reaches_the_bus(make_bus):
    bus = await make_bus("memory://")
    with pytest.raises(MessageTooLarge):
        await bus.publish(_payload(1, details={"blob": "x" * 8000}))


async def test_stop_ends_local_subscriptions_and_refuses_publishing(make_bus):
    bus = await make_bus("memory://")
    sub = bus.subscribe()
    await bus.stop()
    with pytest.raises(SubscriptionClosed) as ended:
        await anext(sub)
    assert ended.value.code == BUS_STOPPED
    with pytest.raises(BusUnavailable):
        await bus.publish(_payload(1))


def test_an_unknown_bus_scheme_is_refused_up_front():
    with pytest.raises(ValueError, match="unsupported bus URL"):
        EventBus("kafka://localhost")


def test_sqlalchemy_style_postgres_urls_become_asyncpg_dsns():
    assert asyncpg_dsn("postgresql+asyncpg://u@h:5432/db") == "postgresql://u@h:5432/db"
    assert asyncpg_dsn("postgres://u@h/db") == "postgresql://u@h/db"
    with pytest.raises(ValueError):
        asyncpg_dsn("mysql://u@h/db")


async def _wait_for(predicate, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


@needs_redis
@pytest.mark.redis
async def test_redis_reader_resubscribes_after_its_connection_is_killed(make_bus):
    reconnected = asyncio.Event()
    name = f"stateward-test-{_suffix()}"
    bus = await make_bus(REDIS_URL, client_name=name, on_reconnect=reconnected.set)
    sub = bus.subscribe()
    await bus.publish(_payload(1))
    assert (await _take(sub, 1))[0]["id"] == "1"

    admin = aioredis.Redis.from_url(REDIS_URL)
    try:
        clients = await admin.client_list(_type="pubsub")
        ours = [c["id"] for c in clients if c.get("name") == name]
        assert len(ours) == 1, "exactly one bus subscription per node"
        await admin.execute_command("CLIENT", "KILL", "ID", ours[0])
        await asyncio.wait_for(reconnected.wait(), timeout=10)
        assert bus.reconnects == 1
        clients = await admin.client_list(_type="pubsub")
        assert len([c for c in clients if c.get("name") == name]) == 1
    finally:
        await admin.aclose()

    await bus.publish(_payload(2))
    assert (await _take(sub, 1))[0]["id"] == "2", "the local subscriber survived the outage"


@needs_postgres
@pytest.mark.postgres
async def test_postgres_reader_resubscribes_after_its_listen_backend_is_terminated(make_bus):
    calls: list[int] = []

    async def on_reconnect() -> None:
        calls.append(1)

    bus = await make_bus(POSTGRES_URL, on_reconnect=on_reconnect)
    sub = bus.subscribe()
    await bus.publish(_payload(1))
    assert (await _take(sub, 1))[0]["id"] == "1"

    backend = bus.backend
    assert isinstance(backend, PostgresNotifyBackend)
    admin = await asyncpg.connect(asyncpg_dsn(POSTGRES_URL))
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", backend.listen_pid)
    finally:
        await admin.close()
    await _wait_for(lambda: calls == [1])
    assert bus.connected and bus.backend is not backend

    await bus.publish(_payload(2))
    assert (await _take(sub, 1))[0]["id"] == "2", "the local subscriber survived the outage"


@needs_postgres
@pytest.mark.postgres
async def test_postgres_refuses_a_notify_payload_of_8000_bytes_or_more():
    backend = PostgresNotifyBackend(POSTGRES_URL)  # type: ignore[arg-type]
    await backend.connect()
    try:
        with pytest.raises(NotifyPayloadTooLarge):
            await backend.publish(f"stateward.test.{_suffix()}", "x" * 8000)
    finally:
        await backend.disconnect()
