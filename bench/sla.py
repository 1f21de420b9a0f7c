"""SLA scanner cost: time per tick with 10k and with 200k active instances, 100 of them due.

The scan is an indexed range query over the pending-only partial index, so its cost
should depend on the rows that are due, not on the instances that are not: the goal is
a 200k/10k ratio under 2x. Setup bulk-inserts instance rows with SQL (not measured); a
round then re-arms 100 warnings and times `sla.scan` firing them through `act` (one
`$sla` event each). The median of the rounds is reported, beside the candidate query
alone and an idle scan (nothing due).

Usage: `python bench/sla.py [--quick] [--json] [--rounds N] [--postgres URL]`; SQLite by
default; `--postgres postgresql+asyncpg://…/db` (an existing database, tables created)
runs the same on PostgreSQL. `--json` prints
`{"tick_ms_10k": …, "tick_ms_200k": …, "ratio": …}` as the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert, update

from stateward.governance.keys import generate_keypair
from stateward.observe.progress import progress
from stateward.persistence.processes import D, P
from stateward.runtime.access.genesis import init
from stateward.runtime.access.registry import deploy_workflow
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.core.ops_support import kernel_repo
from stateward.runtime.core.services import Runtime
from stateward.runtime.sweeps import sla
from stateward.settings import Settings

DUE = 100
CHUNK = 5000
WORKFLOW: dict[str, Any] = {
    "$version": "2.0",
    "$path": "bench/sla/ticket",
    "initial": "review",
    "states": {
        "review": {"label": "Review", "assign": "analyst", "sla_seconds": 86400},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {"close": {"from": "review", "to": "done"}},
}


def _row(pid: str, now: datetime, warn_at: datetime) -> dict[str, Any]:
    return {
        "id": pid, "kind": "instance", "namespace": "bench/sla", "workflow": WORKFLOW["$path"],
        "workflow_version": 1, "state": "review",
        "status": "active", "seq": 0, "state_entered_at": now, "last_event_at": now,
        "created_at": now, "updated_at": now, "sla_warn_at": warn_at,
        "sla_due_at": warn_at + timedelta(days=1), "automation_chain": 0,
    }  # fmt: skip


async def _insert(conn: Any, rows: list[dict[str, Any]]) -> None:
    """The instances' process rows and their data rows (`process_data`)."""
    await conn.execute(insert(P), rows)
    await conn.execute(
        insert(D), [{"process_id": r["id"], "data": {"state": "review"}} for r in rows]
    )


async def _fill(rt: Runtime, total: int, now: datetime) -> list[str]:
    """Insert `total` instances in `review`: DUE with a passed warning, the rest not due."""
    due_ids = [str(uuid.uuid4()) for _ in range(DUE)]
    later = now + timedelta(hours=12)
    async with rt.engine.begin() as conn:
        rows = [_row(pid, now, now - timedelta(seconds=10)) for pid in due_ids]
        await _insert(conn, rows)
        with progress(f"seeding {total} instances", total=total - DUE) as bar:
            for start in range(0, total - DUE, CHUNK):
                size = min(CHUNK, total - DUE - start)
                batch = [
                    _row(str(uuid.uuid4()), now, later + timedelta(milliseconds=i))
                    for i in range(size)
                ]
                await _insert(conn, batch)
                bar.advance(size)
        if rt.engine.dialect.name == "postgresql":
            await conn.exec_driver_sql("ANALYZE processes")
        else:
            await conn.exec_driver_sql("ANALYZE")
    return due_ids


async def _rearm(rt: Runtime, ids: list[str]) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(update(P).where(P.c.id.in_(ids)).values(sla_warned_at=None))


async def measure(url: str, total: int, rounds: int) -> dict[str, float]:
    """Median ms of a scan firing DUE warnings among `total` instances, plus the query."""
    clock = ManualClock(datetime.now(UTC))
    rt = await Runtime.open(Settings(database_url=url), clock=clock, node_key=generate_keypair())
    try:
        operator = generate_keypair()
        await init(rt, operator)
        await deploy_workflow(rt, operator, WORKFLOW)
        due = await _fill(rt, total, clock.now())
        scans, queries, idle = [], [], []
        for _ in range(rounds):
            async with rt.uow(readonly=True) as uow:
                started = time.perf_counter()
                found = await kernel_repo(uow).due_sla("warning", clock.now(), sla.BATCH)
                queries.append((time.perf_counter() - started) * 1000)
            assert len(found) == DUE, len(found)
            started = time.perf_counter()
            report = await sla.scan(rt)
            scans.append((time.perf_counter() - started) * 1000)
            assert len(report.warnings) == DUE, report
            started = time.perf_counter()
            assert (await sla.scan(rt)).fired == 0
            idle.append((time.perf_counter() - started) * 1000)
            clock.advance(1)
            await _rearm(rt, due)
        return {
            "scan_ms": statistics.median(scans),
            "query_ms": statistics.median(queries),
            "idle_ms": statistics.median(idle),
        }
    finally:
        await rt.close()


async def run(url_for: Any, sizes: tuple[int, int], rounds: int) -> dict[str, Any]:
    """Both sizes on fresh databases from `url_for(size)`; the result object."""
    small = await measure(url_for(sizes[0]), sizes[0], rounds)
    large = await measure(url_for(sizes[1]), sizes[1], rounds)
    return {"small": small, "large": large, "ratio": large["scan_ms"] / small["scan_ms"]}


def main() -> None:
    """Parse arguments, run the benchmark, print the figures (and the JSON line)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2k and 20k instances, 2 rounds")
    parser.add_argument("--json", action="store_true", help="print a JSON object last")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--postgres", default=None, help="also run on this PostgreSQL URL")
    args = parser.parse_args()
    sizes = (2_000, 20_000) if args.quick else (10_000, 200_000)
    rounds = args.rounds or (2 if args.quick else 5)
    tmp = Path(tempfile.mkdtemp(prefix="stateward-bench-sla-"))
    result = asyncio.run(run(lambda n: f"sqlite+aiosqlite:///{tmp}/sla-{n}.db", sizes, rounds))
    out: dict[str, Any] = {
        "tick_ms_10k": round(result["small"]["scan_ms"], 2),
        "tick_ms_200k": round(result["large"]["scan_ms"], 2),
        "ratio": round(result["ratio"], 3),
        "query_ms_10k": round(result["small"]["query_ms"], 3),
        "query_ms_200k": round(result["large"]["query_ms"], 3),
        "idle_ms_10k": round(result["small"]["idle_ms"], 3),
        "idle_ms_200k": round(result["large"]["idle_ms"], 3),
        "sizes": list(sizes),
        "due": DUE,
        "backend": "sqlite",
    }
    print(f"sqlite: {sizes[0]} instances: scan {out['tick_ms_10k']} ms "
          f"(query {out['query_ms_10k']} ms, idle {out['idle_ms_10k']} ms)")  # fmt: skip
    print(f"sqlite: {sizes[1]} instances: scan {out['tick_ms_200k']} ms "
          f"(query {out['query_ms_200k']} ms, idle {out['idle_ms_200k']} ms)")  # fmt: skip
    print(f"sqlite: ratio {out['ratio']} (goal < 2)")
    if args.postgres:
        pg = asyncio.run(_postgres(args.postgres, sizes, rounds))
        out["postgres"] = pg
        print(f"postgres: scan {pg['tick_ms_10k']} ms / {pg['tick_ms_200k']} ms, "
              f"ratio {pg['ratio']}")  # fmt: skip
    if args.json:
        print(json.dumps(out))


async def _postgres(url: str, sizes: tuple[int, int], rounds: int) -> dict[str, Any]:
    """The same on PostgreSQL: a fresh database per size beside the given one."""
    import asyncpg
    from sqlalchemy.engine import make_url

    base = make_url(url)
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
    names = {n: f"sw_bench_sla_{uuid.uuid4().hex[:8]}_{n}" for n in sizes}
    conn = await asyncpg.connect(admin)
    try:
        for name in names.values():
            await conn.execute(f'CREATE DATABASE "{name}"')
        result = await run(
            lambda n: base.set(database=names[n]).render_as_string(hide_password=False),
            sizes,
            rounds,
        )
    finally:
        for name in names.values():
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()
    return {
        "tick_ms_10k": round(result["small"]["scan_ms"], 2),
        "tick_ms_200k": round(result["large"]["scan_ms"], 2),
        "ratio": round(result["ratio"], 3),
        "query_ms_10k": round(result["small"]["query_ms"], 3),
        "query_ms_200k": round(result["large"]["query_ms"], 3),
    }


if __name__ == "__main__":
    main()
