"""Nodes on one PostgreSQL: throughput and lock waits as nodes are added.

For each node count in `--nodes` (default 1,2,4): a fresh PostgreSQL database, that many
`stateward serve` processes on it (memory bus: no subscriptions here), `--clients`
keep-alive connections spread over the nodes, each bumping its own instance with
`performAction` for `--seconds`. Reported per count: actions/s, server CPU per action
(all node processes), p99, and lock waits: pg_stat_activity sampled every 20 ms during
the run — the mean number of this database's backends waiting on a lock, by wait event
(`transactionid`/`tuple`: row locks, e.g. the sequencer's log-index row; `advisory`).
PostgreSQL: STATEWARD_TEST_POSTGRES_URL (default postgresql+asyncpg://postgres@127.0.0.1/test).
With `--workers`, each count is ONE `stateward serve --workers N` (N worker processes
behind one socket, the database's bus) and every client goes to that one URL; CPU is the
supervisor's and its workers'.
Usage: `python bench/nodes.py [--nodes 1,2,4] [--workers] [--quick] [--json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Proc, cpu_seconds, gql, hammer, load_average, login, percentile
from api import ACT, COUNTER

DEFAULT_PG = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


def _dsn(url: str, database: str | None = None) -> str:
    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


async def _admin(base: str, sql: str) -> None:
    conn = await asyncpg.connect(_dsn(base))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _sample_locks(dsn: str, name: str, stop: asyncio.Event) -> tuple[int, dict[str, int]]:
    """(samples, waiting backends summed per wait event) until `stop`."""
    conn = await asyncpg.connect(dsn)
    waits: collections.Counter[str] = collections.Counter()
    samples = 0
    try:
        while not stop.is_set():
            rows = await conn.fetch(
                "SELECT wait_event FROM pg_stat_activity WHERE datname = $1 "
                "AND wait_event_type = 'Lock'",
                name,
            )
            samples += 1
            waits.update(str(r["wait_event"]) for r in rows)
            await asyncio.sleep(0.02)
    finally:
        await conn.close()
    return samples, dict(waits)


def _tree_cpu(pid: int) -> float:
    """CPU seconds of `pid` and of its live descendants (`serve --workers`)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children[parent].append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            total += cpu_seconds(current)
        except OSError:
            continue
        todo.extend(children.get(current, ()))
    return total


async def _run_count(
    base: str, nodes: int, clients: int, seconds: float, workers: bool = False
) -> dict[str, Any]:
    name = f"sw_nodes_{uuid.uuid4().hex[:10]}"
    await _admin(base, f'CREATE DATABASE "{name}"')
    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    procs: list[Proc] = []
    try:
        with tempfile.TemporaryDirectory(prefix="stateward-nodes-") as tmp:
            for i in range(1 if workers else nodes):  # the first makes the genesis
                env = {
                    "STATEWARD_DATABASE_URL": url,
                    "STATEWARD_BUS_URL": "memory://",
                    "STATEWARD_NODE_KEY_FILE": f"{tmp}/node{i}.json",
                    "STATEWARD_OPERATOR_KEY_FILE": f"{tmp}/operator.json",
                }
                cmd = [sys.executable, "-m", "stateward.cli", "serve", "--port", "0"]
                if workers:
                    env["STATEWARD_BUS_URL"] = url  # what --workers would switch to anyway
                    cmd += ["--workers", str(nodes)]
                procs.append(Proc(cmd, env, tmp))
            token = await login(procs[0].url, Path(tmp) / "operator.json")
            await gql(procs[0].url, "mutation($d:JSON!){addWorkflow(definition:$d){path}}",
                      {"d": COUNTER}, token)  # fmt: skip
            start = 'mutation{startInstance(workflow:"bench/api/counter"){instanceId}}'
            ids = [
                (await gql(procs[0].url, start, {}, token))["startInstance"]["instanceId"]
                for _ in range(clients)
            ]
            bodies = [json.dumps({"query": ACT, "variables": {"i": i}}).encode() for i in ids]
            auth = {"Authorization": f"Bearer {token}"}

            async def load(span: float) -> tuple[int, list[float]]:
                if workers:
                    return await hammer(procs[0].url, clients, span, lambda i, n: bodies[i], auth)
                per_node = [
                    hammer(
                        p.url,
                        len(range(k, clients, nodes)),
                        span,
                        lambda i, n, k=k: bodies[k + i * nodes],
                        auth,
                    )
                    for k, p in enumerate(procs)
                    if k < clients
                ]
                done = await asyncio.gather(*per_node)
                return sum(c for c, _ in done), [x for _, lat in done for x in lat]

            await load(1.0)  # warm-up
            stop = asyncio.Event()
            sampler = asyncio.create_task(_sample_locks(_dsn(base, name), name, stop))
            cpu = sum(_tree_cpu(p.proc.pid) for p in procs)
            began = time.perf_counter()
            count, latencies = await load(seconds)
            elapsed = time.perf_counter() - began
            spent = sum(_tree_cpu(p.proc.pid) for p in procs) - cpu
            stop.set()
            samples, waits = await sampler
    finally:
        for proc in procs:
            proc.stop()
        await _admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return {
        "nodes": nodes,
        "workers": workers,
        "actions_per_s": count / elapsed,
        "server_ms_per_action": spent * 1000 / max(count, 1),
        "p99_ms": percentile(latencies, 0.99),
        "lock_waiting_backends": sum(waits.values()) / max(samples, 1),
        "lock_waits_by_event": {k: v / max(samples, 1) for k, v in waits.items()},
    }


def main(argv: list[str] | None = None) -> int:
    """Measure each node count; print a table (and a JSON line with `--json`)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", default="1,2,4")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", action="store_true",
                        help="one `serve --workers N` per count instead of N nodes")  # fmt: skip
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    base = os.environ.get("STATEWARD_TEST_POSTGRES_URL") or DEFAULT_PG
    seconds = 3.0 if args.quick else args.seconds
    out: dict[str, Any] = {"load_average_before": load_average(), "runs": []}
    for n in (int(x) for x in args.nodes.split(",")):
        row = asyncio.run(_run_count(base, n, args.clients, seconds, args.workers))
        out["runs"].append(row)
        kind = "worker" if args.workers else "node"
        print(f"{n} {kind}(s): {row['actions_per_s']:7.0f} actions/s  "
              f"{row['server_ms_per_action']:.2f} ms CPU/action  p99 {row['p99_ms']:.0f} ms  "
              f"lock-waiting backends {row['lock_waiting_backends']:.2f} "
              f"{row['lock_waits_by_event']}", flush=True)  # fmt: skip
    out["load_average_after"] = load_average()
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
