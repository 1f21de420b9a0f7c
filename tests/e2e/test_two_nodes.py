"""Two `stateward serve` processes on one PostgreSQL database, with a Redis or PostgreSQL bus.

A subscriber on node A sees, in order and without a gap, the events of actions performed
on node B — also when the bus connections of the nodes are cut mid-stream (Redis: `CLIENT
KILL` of the nodes' named bus clients; PostgreSQL: `pg_terminate_backend` of the LISTEN
connections): the relay re-subscribes and catches up from the outbox by cursor.
The shared servers are never restarted; every test uses its own database and channel.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from harness import Client, ServerProcess, Subscriber, cursors, login
from redis import asyncio as aioredis
from sqlalchemy.engine import make_url

from stateward.governance.keys import read_key_file

REDIS_URL = os.environ.get("STATEWARD_TEST_REDIS_URL")
POSTGRES_URL = os.environ.get("STATEWARD_TEST_POSTGRES_URL")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.skipif(not POSTGRES_URL, reason="STATEWARD_TEST_POSTGRES_URL is not set"),
]

NAMESPACE = "multi/node"
COUNTER: dict[str, Any] = {
    "$version": "2.0",
    "$path": "multi/node/counter",
    "initial": "open",
    "states": {"open": {"label": "Open"}, "closed": {"label": "Closed", "terminal": True}},
    "actions": {
        "bump": {"label": "Bump", "from": "open", "mutate": {"$increment": {"n": 1}}},
        "close": {"label": "Close", "from": "open", "to": "closed"},
    },
}
BEFORE_OUTAGE = 8
DURING_OUTAGE = 20


def _asyncpg(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture
def database(postgres_db_url: str) -> str:
    """A fresh migrated PostgreSQL database for both nodes (the root conftest's)."""
    return postgres_db_url


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(_asyncpg(POSTGRES_URL or ""))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture
async def bus_database() -> AsyncIterator[str]:
    """A separate empty database whose connections are only the nodes' bus connections."""
    name = f"sw_e2e_bus_{uuid.uuid4().hex[:12]}"
    await _admin(f'CREATE DATABASE "{name}"')
    yield make_url(POSTGRES_URL or "").set(database=name).render_as_string(hide_password=False)
    await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _start_nodes(tmp_path: Path, database: str, bus_url: str) -> list[ServerProcess]:
    channel = f"stateward.e2e.{uuid.uuid4().hex[:10]}"
    nodes = []
    for name in ("a", "b"):  # one after the other: A makes the genesis, B finds it
        env = {
            "STATEWARD_DATABASE_URL": database,
            "STATEWARD_BUS_URL": bus_url,
            "STATEWARD_BUS_CHANNEL": channel,
            "STATEWARD_OPERATOR_KEY_FILE": str(tmp_path / "operator.json"),
            "STATEWARD_NODE_KEY_FILE": str(tmp_path / f"node-{name}.json"),
        }
        nodes.append(ServerProcess(env=env, cwd=tmp_path).start())
    return nodes


async def _scenario(
    tmp_path: Path, nodes: list[ServerProcess], outage: Callable[[], Awaitable[int]]
):
    """Actions on B, a subscriber on A, the bus cut after BEFORE_OUTAGE actions."""
    a, b = nodes
    token = await login(a.url, read_key_file(tmp_path / "operator.json"))
    on_a, on_b = Client(a.url, token), Client(b.url, token)
    live = await Subscriber(a.ws_url, token, {"f": {"namespace": NAMESPACE}}).start()
    try:
        await on_b.ok("mutation($d:JSON!){addWorkflow(definition:$d){path}}", {"d": COUNTER})
        started = await on_b.ok(
            'mutation{startInstance(workflow:"multi/node/counter"){instanceId}}'
        )
        instance = started["startInstance"]["instanceId"]
        bump = 'mutation($i:ID!){performAction(instance:$i,action:"bump"){duplicate}}'
        for _ in range(BEFORE_OUTAGE):
            await on_b.ok(bump, {"i": instance})
        killed = await outage()
        assert killed >= 2, "expected to cut the bus connection of both nodes"
        for _ in range(DURING_OUTAGE):
            await on_b.ok(bump, {"i": instance})
        await on_b.ok(
            'mutation($i:ID!){performAction(instance:$i,action:"close"){duplicate}}',
            {"i": instance},
        )
        events = await live.wait_for(
            lambda ev: any(e["type"] == "workflow.completed" for e in ev), timeout=60
        )
        replay = await Subscriber(
            a.ws_url, token, {"f": {"namespace": NAMESPACE}, "a": "0"}
        ).start()
        try:
            expected = await replay.wait_for(
                lambda ev: any(e["type"] == "workflow.completed" for e in ev), timeout=30
            )
        finally:
            await replay.close()
    finally:
        await live.close()
        await on_a.close()
        await on_b.close()
    assert cursors(events) == cursors(expected)  # every row, in order, no duplicate
    assert cursors(events) == sorted(set(cursors(events)))
    assert [e["type"] for e in events].count("workflow.updated") == BEFORE_OUTAGE + DURING_OUTAGE
    await asyncio.sleep(0.5)
    assert "event bus connection lost" in a.output()


@pytest.mark.redis
@pytest.mark.skipif(not REDIS_URL, reason="STATEWARD_TEST_REDIS_URL is not set")
async def test_redis_bus_delivers_node_b_events_to_node_a_across_a_bus_outage(
    tmp_path: Path, database: str
) -> None:
    assert REDIS_URL is not None
    nodes = _start_nodes(tmp_path, database, REDIS_URL)
    channel = nodes[0].env["STATEWARD_BUS_CHANNEL"]

    async def kill_bus_clients() -> int:
        redis = aioredis.Redis.from_url(REDIS_URL)
        try:
            clients = await redis.client_list()
            mine = [c for c in clients if c.get("name") == f"sw-bus:{channel}"]
            for client in mine:
                await redis.client_kill_filter(_id=client["id"])
            return len(mine)
        finally:
            await redis.aclose()

    try:
        await _scenario(tmp_path, nodes, kill_bus_clients)
    finally:
        for node in nodes:
            node.stop()


async def test_postgres_bus_delivers_node_b_events_to_node_a_across_a_bus_outage(
    tmp_path: Path, database: str, bus_database: str
) -> None:
    nodes = _start_nodes(tmp_path, database, bus_database)
    bus_db = make_url(bus_database).database

    async def terminate_listeners() -> int:
        conn = await asyncpg.connect(_asyncpg(database))
        try:
            rows = await conn.fetch(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid() "
                "AND (query ILIKE 'LISTEN%' OR query = 'SELECT 1')",
                bus_db,
            )
        finally:
            await conn.close()
        return len(rows)

    try:
        await _scenario(tmp_path, nodes, terminate_listeners)
    finally:
        for node in nodes:
            node.stop()
