"""Subscriptions across a real Redis kill (issue 11).

The test starts its own `redis-server` on a free port, a `stateward serve` node on it,
and subscribers over real graphql-transport-ws websockets; then it kills Redis (SIGKILL),
keeps writing, starts one more subscriber (resuming with `after`) while Redis is down,
and brings Redis back on the same port. Every stream must keep going: each subscriber
sees every event once, in cursor order, including those committed during the outage
(the relay reads them from the outbox while the bus is down), and no stream receives an
error — in particular never the misleading GRAPHQL_VALIDATION_FAILED of the soak.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Client, ServerProcess, Subscriber, cursors, login

from stateward.governance.keys import read_key_file

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not found"),
]

NAMESPACE = "outage/redis"
COUNTER: dict[str, Any] = {
    "$version": "2.0",
    "$path": "outage/redis/counter",
    "initial": "open",
    "states": {"open": {"label": "Open"}, "closed": {"label": "Closed", "terminal": True}},
    "actions": {
        "bump": {"label": "Bump", "from": "open", "mutate": {"$increment": {"n": 1}}},
        "close": {"label": "Close", "from": "open", "to": "closed"},
    },
}
BUMP = 'mutation($i:ID!){performAction(instance:$i,action:"bump"){duplicate}}'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """Our own redis-server (no persistence) on one port, killable and restartable."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port)):
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def updates(events: list[dict[str, Any]]) -> int:
    """How many `workflow.updated` events (bumps) a subscriber has seen."""
    return sum(e["type"] == "workflow.updated" for e in events)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer(_free_port())
    server.start()
    yield server
    server.kill()


async def test_streams_survive_a_redis_kill_without_gap_or_error(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    env = {
        "STATEWARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'node.db'}",
        "STATEWARD_BUS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "STATEWARD_OPERATOR_KEY_FILE": str(tmp_path / "operator.json"),
    }
    node = ServerProcess(env=env, cwd=tmp_path).start()
    token = await login(node.url, read_key_file(tmp_path / "operator.json"))
    client = Client(node.url, token)
    subscribers: list[Subscriber] = []
    try:
        live = await Subscriber(node.ws_url, token, {"f": {"namespace": NAMESPACE}}).start()
        subscribers.append(live)
        await client.ok("mutation($d:JSON!){addWorkflow(definition:$d){path}}", {"d": COUNTER})
        started = await client.ok(
            'mutation{startInstance(workflow:"outage/redis/counter"){instanceId}}'
        )
        instance = started["startInstance"]["instanceId"]
        for _ in range(5):
            await client.ok(BUMP, {"i": instance})
        before = await live.wait_for(lambda ev: updates(ev) >= 5)
        resume_at = int(before[-3]["cursor"])  # the late subscriber misses 2 bumps + outage

        redis_server.kill()
        for _ in range(5):
            await client.ok(BUMP, {"i": instance})
        # Delivered during the outage, read from the outbox (the bus is still down).
        await live.wait_for(lambda ev: updates(ev) >= 10, timeout=30)
        assert "event bus connection lost" in node.output()
        late = await Subscriber(
            node.ws_url, token, {"f": {"namespace": NAMESPACE}, "a": str(resume_at)}
        ).start()
        subscribers.append(late)
        await late.wait_for(lambda ev: updates(ev) >= 7, timeout=30)

        redis_server.start()  # same port: the node's bus reconnects
        deadline = time.monotonic() + 30
        while "event bus re-subscribed" not in node.output():
            assert time.monotonic() < deadline, node.output()[-3000:]
            await asyncio.sleep(0.2)
        for _ in range(5):
            await client.ok(BUMP, {"i": instance})
        await client.ok(
            'mutation($i:ID!){performAction(instance:$i,action:"close"){duplicate}}',
            {"i": instance},
        )

        def done(ev: list[dict[str, Any]]) -> bool:
            return any(e["type"] == "workflow.completed" for e in ev)

        seen = await live.wait_for(done, timeout=30)
        seen_late = await late.wait_for(done, timeout=30)
        replay = await Subscriber(
            node.ws_url, token, {"f": {"namespace": NAMESPACE}, "a": "0"}
        ).start()
        subscribers.append(replay)
        expected = await replay.wait_for(done, timeout=30)
    finally:
        for sub in subscribers:
            await sub.close()
        await client.close()
        node.stop()
    assert cursors(seen) == cursors(expected)  # every row, in order, each once
    assert cursors(seen_late) == [c for c in cursors(expected) if c > resume_at]
    assert [e["type"] for e in seen].count("workflow.updated") == 15
    for sub in subscribers:
        assert sub.errors == []
