"""Operating instances at scale (issue 15): bulk operations and message correlation.

- `cancel_per_s`: a `bulkCancel` batch over 10,000 active instances, processed by one node
  (pages of 100, one `$cancel` event per instance through `act`), instances per second.
- `migrate_per_s`: the same with `bulkMigrate` to version 2 (`$migrate` events), when the
  migration operation is installed (`null` otherwise).
- `correlate_ms_10k` / `correlate_ms_200k`: the latency of one `publishMessage` with 10k
  and with 200k instances waiting for the message (each with its own correlation key), the
  message matching one of them (median of the rounds; includes the delivery's event).
  `correlate_ratio` is the second over the first: the lookup is an index on
  `(name, correlation_key)`, so the goal is under 2. `lookup_ms_*` time that indexed
  query alone.

- Server CPU: the runtime runs in this process, so its CPU time (user + system, every
  thread) over the measured work is the server's: `cancel_cpu_ms_per_instance`,
  `migrate_cpu_ms_per_instance` and `correlate_cpu_ms_10k` / `_200k` (per publish). On a
  shared machine it is steadier than the rates and latencies.

Instance rows (and, for correlation, their `message_waits` rows) are bulk-inserted with SQL
(not measured). Usage: `python bench/operations.py [--quick] [--json] [--rounds N]`;
SQLite in a temporary folder. `--quick` (CI size): 1,000-instance batches, 2k and 20k
waiting instances. `--json` prints one object as the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from stateward.governance.keys import generate_keypair
from stateward.observe.progress import progress
from stateward.persistence.messages import W
from stateward.persistence.processes import D, P
from stateward.runtime.access.genesis import init
from stateward.runtime.access.registry import deploy_workflow, update_workflow
from stateward.runtime.batches import bulk
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.core.services import Runtime
from stateward.runtime.messages import correlate
from stateward.settings import Settings

NAMESPACE = "bench/ops"
CHUNK = 5000
ORDER: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{NAMESPACE}/order",
    "initial": "waiting",
    "correlation": {"paid": "data.order"},
    "states": {
        "waiting": {"label": "Waiting for payment"},
        "paid": {"label": "Paid", "terminal": True},
    },
    "actions": {"pay": {"label": "Pay", "from": "waiting", "to": "paid", "message": "paid"}},
}


def _row(pid: str, key: str, now: datetime) -> dict[str, Any]:
    return {
        "id": pid, "kind": "instance", "namespace": NAMESPACE, "workflow": ORDER["$path"],
        "workflow_version": 1, "state": "waiting",
        "status": "active", "seq": 0, "state_entered_at": now, "last_event_at": now,
        "created_at": now, "updated_at": now, "automation_chain": 0,
    }  # fmt: skip


async def _open(url: str) -> tuple[Runtime, str]:
    clock = ManualClock(datetime.now(UTC))
    rt = await Runtime.open(Settings(database_url=url), clock=clock, node_key=generate_keypair())
    operator = generate_keypair()
    await init(rt, operator.public)
    await deploy_workflow(rt, operator, ORDER)
    await update_workflow(rt, operator, {**ORDER, "$description": "v2"})  # version 2
    return rt, operator.public


async def _fill(rt: Runtime, total: int, *, waits: bool, label: str) -> list[str]:
    """Insert `total` instances waiting for `paid` (keys `k-0`…), optionally indexed."""
    now = rt.clock.now()
    ids: list[str] = []
    async with rt.engine.begin() as conn:
        with progress(f"seeding {total} {label}", total=total) as bar:
            for start in range(0, total, CHUNK):
                size = min(CHUNK, total - start)
                part = [(str(uuid.uuid4()), f"k-{start + i}") for i in range(size)]
                await conn.execute(insert(P), [_row(pid, key, now) for pid, key in part])
                data = [
                    {"process_id": pid, "data": {"state": "waiting", "order": key}}
                    for pid, key in part
                ]
                await conn.execute(insert(D), data)
                if waits:
                    rows = [
                        {"process_id": pid, "name": "paid", "correlation_key": key,
                         "action": "pay", "namespace": NAMESPACE}
                        for pid, key in part
                    ]  # fmt: skip
                    await conn.execute(insert(W), rows)
                ids.extend(pid for pid, _ in part)
                bar.advance(size)
        await conn.exec_driver_sql("ANALYZE")
    return ids


async def bulk_rate(
    url: str, total: int, kind: str, params: dict[str, Any]
) -> tuple[float, float] | None:
    """(instances per second, CPU ms per instance) of one batch of `kind` over `total`
    instances."""
    if kind not in bulk.BUILDERS:
        return None
    rt, admin = await _open(url)
    try:
        ids = await _fill(rt, total, waits=False, label=f"instances ({kind})")
        batch = await bulk.create(rt, admin, kind, params, ids)
        started, cpu = time.perf_counter(), time.process_time()
        progress_ = await bulk.process(rt, batch.id)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert progress_.done and progress_.succeeded == total, progress_
        return total / elapsed, cpu * 1000 / total
    finally:
        await rt.close()


async def correlate_ms(url: str, total: int, rounds: int) -> tuple[float, float, float]:
    """Median ms of a publish matching one of `total` waiting instances, of its index
    lookup alone, and median CPU ms of a publish (two warm-up publishes first, not
    counted)."""
    rt, admin = await _open(url)
    try:
        await _fill(rt, total, waits=True, label="waiting instances")
        timings, lookups, cpus = [], [], []
        for n in range(rounds + 2):
            key = f"k-{(n * 7919) % total}"
            async with rt.uow(readonly=True) as uow:
                started = time.perf_counter()
                found = await uow.messages.waiting(NAMESPACE, "paid", key)
                lookup = (time.perf_counter() - started) * 1000
            assert len(found) == 1, found
            started, cpu = time.perf_counter(), time.process_time()
            result = await correlate.publish(rt, admin, NAMESPACE, "paid", key, {"n": n})
            elapsed = (time.perf_counter() - started) * 1000
            cpu = (time.process_time() - cpu) * 1000
            assert len(result.delivered) == 1, result
            if n >= 2:
                timings.append(elapsed)
                lookups.append(lookup)
                cpus.append(cpu)
        return statistics.median(timings), statistics.median(lookups), statistics.median(cpus)
    finally:
        await rt.close()


async def run(folder: Path, batch: int, sizes: tuple[int, int], rounds: int) -> dict[str, Any]:
    """Every figure, each on a fresh SQLite database in `folder`."""

    def url(name: str) -> str:
        return f"sqlite+aiosqlite:///{folder}/{name}.db"

    cancel = await bulk_rate(url("cancel"), batch, "cancel", {"reason": "bench"})
    migrate = await bulk_rate(url("migrate"), batch, "migrate", {"toVersion": 2})
    small, small_lookup, small_cpu = await correlate_ms(url("corr-small"), sizes[0], rounds)
    large, large_lookup, large_cpu = await correlate_ms(url("corr-large"), sizes[1], rounds)
    return {
        "cancel_per_s": None if cancel is None else round(cancel[0], 1),
        "migrate_per_s": None if migrate is None else round(migrate[0], 1),
        "cancel_cpu_ms_per_instance": None if cancel is None else round(cancel[1], 3),
        "migrate_cpu_ms_per_instance": None if migrate is None else round(migrate[1], 3),
        "correlate_cpu_ms_10k": round(small_cpu, 2),
        "correlate_cpu_ms_200k": round(large_cpu, 2),
        "correlate_ms_10k": round(small, 2),
        "correlate_ms_200k": round(large, 2),
        "correlate_ratio": round(large / small, 3),
        "lookup_ms_10k": round(small_lookup, 3),
        "lookup_ms_200k": round(large_lookup, 3),
        "lookup_ratio": round(large_lookup / small_lookup, 3),
        "batch": batch,
        "waiting": list(sizes),
        "rounds": rounds,
        "backend": "sqlite",
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    """Parse arguments, run the benchmark, print the figures (and the JSON line)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI size: 1k batch, 2k/20k waiting")
    parser.add_argument("--json", action="store_true", help="print a JSON object last")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    batch = 1_000 if args.quick else 10_000
    sizes = (2_000, 20_000) if args.quick else (10_000, 200_000)
    rounds = args.rounds or (5 if args.quick else 15)
    folder = Path(tempfile.mkdtemp(prefix="stateward-bench-ops-"))
    out = asyncio.run(run(folder, batch, sizes, rounds))
    print(f"bulk cancel: {out['cancel_per_s']} instances/s ({batch} instances), "
          f"server CPU {out['cancel_cpu_ms_per_instance']} ms/instance")  # fmt: skip
    print(f"bulk migrate: {out['migrate_per_s']} instances/s ({batch} instances), "
          f"server CPU {out['migrate_cpu_ms_per_instance']} ms/instance")  # fmt: skip
    print(f"publish: {out['correlate_ms_10k']} ms with {sizes[0]} waiting, "
          f"{out['correlate_ms_200k']} ms with {sizes[1]}: ratio {out['correlate_ratio']} "
          "(goal < 2)")  # fmt: skip
    print(f"publish server CPU: {out['correlate_cpu_ms_10k']} ms with {sizes[0]} waiting, "
          f"{out['correlate_cpu_ms_200k']} ms with {sizes[1]}")  # fmt: skip
    print(f"load average {' '.join(str(x) for x in out['loadavg'])}")
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
