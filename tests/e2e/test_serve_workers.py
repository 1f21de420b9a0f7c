"""`stateward serve --workers N`: N worker processes behind one port (issue 18).

Real processes on a real PostgreSQL database: the supervisor starts the workers, a
subscriber held by one worker receives the events of actions another worker performed
(the database's LISTEN/NOTIFY bus, chosen when the bus is `memory://`), a worker that is
killed is replaced, SIGTERM stops them all with exit 0, and SQLite is refused with a
clear message. Which worker accepts a connection is made certain by stopping (SIGSTOP)
the other one while the connection is opened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import Client, ServerProcess, Subscriber, login

from stateward.governance.keys import read_key_file

POSTGRES_URL = os.environ.get("STATEWARD_TEST_POSTGRES_URL")
COUNTER = {
    "$version": "2.0",
    "$path": "multi/workers/counter",
    "initial": "open",
    "states": {"open": {"label": "Open"}},
    "actions": {"bump": {"label": "Bump", "from": "open", "mutate": {"$increment": {"n": 1}}}},
}
BUMP = 'mutation($i:ID!){performAction(instance:$i,action:"bump"){duplicate}}'


def _children(pid: int) -> list[int]:
    """The live child processes of `pid` (from /proc), excluding multiprocessing's
    resource tracker."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z" and b"resource_tracker" not in cmdline:
            found.append(int(entry))
    return sorted(found)


def _wait_children(pid: int, count: int, timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = _children(pid)
        if len(children) == count:
            return children
        time.sleep(0.2)
    raise AssertionError(f"expected {count} workers, have {_children(pid)}")


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="STATEWARD_TEST_POSTGRES_URL is not set")
async def test_two_workers_share_the_port_deliver_across_and_replace_a_killed_one(
    tmp_path: Path, postgres_db_url: str
) -> None:
    env = {
        "STATEWARD_DATABASE_URL": postgres_db_url,
        "STATEWARD_OPERATOR_KEY_FILE": str(tmp_path / "operator.json"),
        "STATEWARD_NODE_KEY_FILE": str(tmp_path / "node.json"),
    }
    server = ServerProcess("--workers", "2", env=env, cwd=tmp_path).start()
    try:
        assert server.proc is not None
        assert "(2 workers)" in server.output()
        assert "LISTEN/NOTIFY bus" in server.output()
        first, second = _wait_children(server.proc.pid, 2)
        token = await login(server.url, read_key_file(tmp_path / "operator.json"))

        os.kill(first, signal.SIGSTOP)  # only the second worker accepts now
        try:
            live = Subscriber(server.ws_url, token, {"f": {"namespace": "multi/workers"}})
            await live.start()
        finally:
            os.kill(first, signal.SIGCONT)
        os.kill(second, signal.SIGSTOP)  # and now only the first one
        try:
            client = Client(server.url, token)
            await client.ok("mutation($d:JSON!){addWorkflow(definition:$d){path}}", {"d": COUNTER})
            started = await client.ok(
                'mutation{startInstance(workflow:"multi/workers/counter"){instanceId}}'
            )
            instance = started["startInstance"]["instanceId"]
            for _ in range(3):
                await client.ok(BUMP, {"i": instance})
            await client.close()
        finally:
            os.kill(second, signal.SIGCONT)
        events = await live.wait_for(
            lambda ev: [e["type"] for e in ev].count("workflow.updated") == 3, timeout=30
        )
        assert {e["instanceId"] for e in events if e["type"] == "workflow.updated"} == {instance}
        await live.close()

        os.kill(first, signal.SIGKILL)  # the supervisor replaces it
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            children = _children(server.proc.pid)
            if len(children) == 2 and first not in children:
                break
            time.sleep(0.2)
        assert len(_children(server.proc.pid)) == 2 and first not in _children(server.proc.pid)
        for _ in range(4):  # fresh connections, whichever worker takes them
            again = Client(server.url, token)
            await again.ok(BUMP, {"i": instance})
            await again.close()
        check = Client(server.url, token)
        data = await check.ok("query($i:ID!){instance(id:$i){data}}", {"i": instance})
        await check.close()
        assert data["instance"]["data"]["n"] == 7
        pid = server.proc.pid
        assert server.stop() == 0
        assert _children(pid) == []
    finally:
        server.stop()


def test_several_workers_on_sqlite_are_refused_with_a_reason(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stateward.cli", "serve", "--workers", "2", "--port", "0",
         "--db", f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "--workers needs PostgreSQL" in done.stderr
    assert not (tmp_path / "x.db").exists()  # refused before anything was created


def test_zero_workers_are_refused_with_a_reason(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stateward.cli", "serve", "--workers", "0", "--port", "0",
         "--db", "postgresql+asyncpg://nobody@127.0.0.1:1/none"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "--workers must be at least 1 (got 0)" in done.stderr
