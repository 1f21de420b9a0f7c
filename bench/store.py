"""Store throughput: events appended per second through `runtime.act`, beside a bare INSERT.

Per backend (SQLite file at synchronous=NORMAL; PostgreSQL in a temporary database):
- events: client-signed envelopes (a self-effect `tick` incrementing a counter) spread
  over `--instances` instances, submitted by `--concurrency` tasks to `runtime.act` — the
  whole path: signature verification, revocation and role reads, the engine, the process
  row, the hash-chained event row and the outbox row, with group commit (one writer task,
  several events per transaction, each all-or-nothing). The same run also measures the
  path without group commit (one transaction per event, sequential) for reference;
- bare: one INSERT of a row of the event row's size per transaction, through the same
  driver stack (async SQLAlchemy unit of work), sequential; measured just before and just
  after the events and averaged, so a change of machine load during the run cancels out.
The ratio is events/s over bare inserts/s. PostgreSQL uses STATEWARD_TEST_POSTGRES_URL,
defaulting to the local server (postgresql+asyncpg://postgres@127.0.0.1:5432/test); when
it cannot be reached the PostgreSQL figures are null with a note on stderr.
Then on SQLite files, in alternating rounds (median ratio of `ROUNDS`, 1 with `--quick`),
each timed after `WARM_PER_INSTANCE` untimed events per instance:
- `full_vs_normal`: events/s with STATEWARD_SQLITE_SYNCHRONOUS=full ÷ normal, 32 writers
  (goal >= 0.3);
- `data_64k_vs_1k`: events/s on instances holding 64 KB of data ÷ 1 KB (goal >= 0.9), with
  `data_64k_vs_1k_cpu` the same ratio in CPU per event (this process's CPU time) and
  `data_cpu_ms_1k` / `data_cpu_ms_64k` the CPU ms per event; the same with a `_resize`
  suffix for an edit that changes the data's length at every event (`$set` of a note of
  0–12 characters; a tick keeps the length but for the counter's digits), with a `_keep`
  suffix for an event that leaves the data as it was (`touch`: a self-transition with no
  mutation, as an approval or a claim often is), and with `_pg` / `_keep_pg` suffixes
  on PostgreSQL when it is reachable (`_cpu`: this process's CPU; with a
  local server also `data_server_ms_1k_pg` / `data_server_ms_64k_pg`, the PostgreSQL
  cluster's CPU ms per event, from /proc).
The process runs the runtime as `stateward serve` does: its heap frozen once the modules
are loaded and the server's collector thresholds (`commands.serve.freeze_heap`), so the
collections measured are a server's. With CPython's defaults (`--default-gc`, how the
bench ran before session 18) a young collection ran every 700 allocations, and with
fixed batches the CPU ratio of 1 KB to 64 KB instances read 0.864 against 0.92 with the
server's settings (docs/performance.md, "Session 18").
With `--server-cpus LIST` the process also keeps its threads on those CPUs as
`STATEWARD_SERVER_CPUS=LIST` makes `stateward serve` do (`commands.affinity.pin_server`):
the one-box setup, where the event loop and SQLite's driver thread share a CPU.
Usage: `python bench/store.py [--quick] [--json] [--default-gc] [--server-cpus LIST]`;
`--json` prints one JSON object last (`gc`: "server" or "default"; `server_cpus`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url

from stateward.commands.affinity import pin_server
from stateward.commands.serve import freeze_heap
from stateward.governance.keys import generate_keypair
from stateward.runtime.access import registry
from stateward.runtime.access.genesis import init
from stateward.runtime.core.act import act
from stateward.runtime.core.commands import sign_as, start_instance
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings, cpu_list

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CLOCK_TICKS, process_stat

#: Alternating rounds of the variants (`--quick`: 1): each ratio is their median. Five,
#: not three: on a shared host one round's ratio moves by ±0.15.
ROUNDS = 5
#: Untimed events per instance before a variant's round is timed (`_sqlite_rate`): the
#: first event of an instance pays what belongs to starting it (the first dump of its
#: large values, its start's pages checkpointed, its rows read into the page cache).
WARM_PER_INSTANCE = 10
DEFAULT_PG = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
COUNTER = {
    "$version": "2.0",
    "$path": "bench/store/counter",
    "initial": "open",
    "states": {"open": {"label": "Open"}, "done": {"label": "Done", "terminal": True}},
    "actions": {
        "tick": {"label": "Tick", "from": "open", "mutate": {"$increment": {"n": 1}}},
        "note": {"label": "Note", "from": "open", "mutate": {"$set": {"note": "input.note"}}},
        "touch": {"label": "Touch", "from": "open"},
        "close": {"label": "Close", "from": "open", "to": "done"},
    },
}


async def _events(
    rt: Runtime,
    n: int,
    instances: int,
    concurrency: int,
    *,
    group: bool,
    data: dict[str, Any] | None = None,
    cpu: list[float] | None = None,
    edit: str = "tick",
    warm: int = 0,
) -> tuple[float, int]:
    """(events/s, bytes of one event row) for `n` ticks through `act` (instances started
    with `data`; the CPU seconds of the ticks appended to `cpu` when given), after
    `warm` ticks that are not timed. With
    `edit="note"` each event is a `note` instead: `$set` of a string whose length changes
    from one event to the next (0–12 characters), so the data's JSON text changes length
    at every event, as most edits do (a tick keeps it: the counter's digits); with
    `edit="touch"` an event that leaves the data as it was."""
    operator = generate_keypair()
    await init(rt, operator)
    await registry.deploy_workflow(rt, operator, COUNTER)
    ids = [
        (await start_instance(rt, operator.public, COUNTER["$path"], data)).record.id
        for _ in range(instances)
    ]
    rt.group_commit = group
    inputs = {"note": lambda i: {"note": "x" * (i % 13)}}
    signed = [
        sign_as(
            rt, operator, ids[i % instances], edit, COUNTER["$path"],
            inputs.get(edit, lambda i: {"i": i})(i),
        )
        for i in range(warm + n)
    ]  # fmt: skip
    gate = asyncio.Semaphore(concurrency)

    async def one(item: Any) -> None:
        async with gate:
            await act(rt, item, attested=False)

    await asyncio.gather(*(one(s) for s in signed[:warm]))
    signed = signed[warm:]

    server = _server_cpu if make_url(str(rt.engine.url)).get_backend_name() != "sqlite" else None
    start, used = time.perf_counter(), time.process_time()
    served = server() if server is not None else None
    await asyncio.gather(*(one(s) for s in signed))
    elapsed = time.perf_counter() - start
    if cpu is not None:
        cpu.append(time.process_time() - used)
        if server is not None and served is not None:
            after = server()
            cpu.append(after - served if after is not None else float("nan"))
    row = len(signed[0].envelope.canonical()) + len(signed[0].signature) + 64 * 3 + 200
    return n / elapsed, row


async def _bare(rt: Runtime, n: int, row_bytes: int, table: str) -> float:
    """Bare single-row INSERT transactions per second, same engine and unit of work."""
    async with rt.engine.begin() as conn:
        await conn.execute(
            text(f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, k VARCHAR(64), body TEXT)")
        )
    body = "x" * row_bytes
    stmt = text(f"INSERT INTO {table} (id, k, body) VALUES (:id, :k, :body)")
    start = time.perf_counter()
    for i in range(n):
        async with rt.uow() as uow:
            await uow.session.execute(stmt, {"id": i, "k": uuid.uuid4().hex, "body": body})
            await uow.commit()
    return n / (time.perf_counter() - start)


async def _measure(url: str, n: int, instances: int, concurrency: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    for group in (False, True):
        settings = Settings(database_url=url)
        rt = await Runtime.open(settings, node_key=generate_keypair())
        try:
            before = await _bare(rt, n // 2, 900, "bench_bare_before") if group else 0.0
            rate, row = await _events(
                rt,
                n if group else max(n // 2, 50),
                instances,
                concurrency if group else 1,
                group=group,
            )
            figures["events_per_s" if group else "single_events_per_s"] = rate
            if group:  # bare inserts before and after the events: load drift cancels out
                after = await _bare(rt, n // 2, row, "bench_bare_after")
                figures["bare_inserts_per_s"] = (before + after) / 2
        finally:
            await rt.close()
        url = await _fresh(url)
    figures["ratio_vs_bare_insert"] = figures["events_per_s"] / figures["bare_inserts_per_s"]
    return figures


def instance_data(size: int) -> dict[str, Any]:
    """Instance data of about `size` bytes of JSON: a list of small records."""
    count = max(1, size // 80)
    return {"items": [{"id": i, "name": f"item-{i}", "note": "n" * 48} for i in range(count)]}


def _server_cpu() -> float | None:
    """CPU seconds used so far by the local PostgreSQL cluster: utime+stime of every
    `postgres` process, plus the children's it has reaped (a backend that exited), from
    /proc. None when no such process is visible (a remote server)."""
    total, seen = 0, False
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            name, fields = process_stat(entry)
        except OSError:  # exited meanwhile
            continue
        if name.startswith("postgres"):
            total += sum(int(fields[k]) for k in (11, 12, 13, 14))
            seen = True
    return total / CLOCK_TICKS if seen else None


async def _sqlite_rate(
    n: int,
    concurrency: int,
    *,
    synchronous: str = "normal",
    data: dict[str, Any] | None = None,
    url: str = "sqlite+aiosqlite:///x.db",
    edit: str = "tick",
) -> tuple[float, float, float | None]:
    """(events/s, CPU ms per event of this process, the database server's CPU ms per
    event or None) on a fresh database of `url`'s kind (a SQLite file by default), group
    commit on; `edit` as in `_events`. The server's CPU is measured for a local
    PostgreSQL (`_server_cpu`); on SQLite the database runs in this process."""
    url = await _fresh(url)
    extra = {"sqlite_synchronous": synchronous} if synchronous != "normal" else {}
    rt = await Runtime.open(Settings(database_url=url, **extra), node_key=generate_keypair())
    cpu: list[float] = []
    try:
        rate, _ = await _events(
            rt, n, concurrency, concurrency, group=True, data=data, cpu=cpu, edit=edit,
            warm=WARM_PER_INSTANCE * concurrency,
        )  # fmt: skip
    finally:
        await rt.close()
    return rate, cpu[0] * 1000 / n, (cpu[1] * 1000 / n if len(cpu) > 1 else None)


async def _variants(quick: bool, rounds: int, pg: bool) -> dict[str, Any]:
    """`full_vs_normal` (32 writers) and `data_64k_vs_1k` (events/s and CPU per event), in
    alternating rounds; each ratio is the median of the rounds' ratios. With `pg` the data
    ratio again on PostgreSQL (`_pg` keys; CPU of this process, not the server's)."""
    n = 300 if quick else 1500
    full: list[float] = []
    sqlite_url = "sqlite+aiosqlite:///x.db"
    #: figure suffix -> (database URL, the action of each event: `_events`)
    sizes = {"": (sqlite_url, "tick"), "_resize": (sqlite_url, "note")}
    sizes["_keep"] = (sqlite_url, "touch")
    if pg:
        pg_url = os.environ.get("STATEWARD_TEST_POSTGRES_URL") or DEFAULT_PG
        sizes["_pg"] = (pg_url, "tick")
        sizes["_keep_pg"] = (pg_url, "touch")
    data: dict[str, list[float]] = {k: [] for k in sizes}
    data_cpu: dict[str, list[float]] = {k: [] for k in sizes}
    cpu_ms: dict[str, list[tuple[float, float]]] = {k: [] for k in sizes}
    server_ms: dict[str, list[tuple[float, float]]] = {k: [] for k in sizes}
    for _ in range(rounds):
        normal_rate, _, _ = await _sqlite_rate(n, 32, synchronous="normal")
        full_rate, _, _ = await _sqlite_rate(n, 32, synchronous="full")
        full.append(full_rate / normal_rate)
        for key, (url, edit) in sizes.items():
            small_rate, small_cpu, small_server = await _sqlite_rate(
                n, 24, data=instance_data(1024), url=url, edit=edit
            )
            big_rate, big_cpu, big_server = await _sqlite_rate(
                n, 24, data=instance_data(64 * 1024), url=url, edit=edit
            )
            data[key].append(big_rate / small_rate)
            data_cpu[key].append(small_cpu / big_cpu)
            cpu_ms[key].append((small_cpu, big_cpu))
            if small_server is not None and big_server is not None:
                server_ms[key].append((small_server, big_server))
    result: dict[str, Any] = {
        "full_vs_normal": statistics.median(full),
        "full_vs_normal_range": [min(full), max(full)],
    }
    for key in sizes:
        result.update(
            {
                f"data_64k_vs_1k{key}": statistics.median(data[key]),
                f"data_64k_vs_1k{key}_range": [min(data[key]), max(data[key])],
                f"data_64k_vs_1k{key}_cpu": statistics.median(data_cpu[key]),
                f"data_cpu_ms_1k{key}": statistics.median(c for c, _ in cpu_ms[key]),
                f"data_cpu_ms_64k{key}": statistics.median(c for _, c in cpu_ms[key]),
            }
        )
        if server_ms[key]:  # a local PostgreSQL: its own CPU per event too
            result.update(
                {
                    f"data_server_ms_1k{key}": statistics.median(c for c, _ in server_ms[key]),
                    f"data_server_ms_64k{key}": statistics.median(c for _, c in server_ms[key]),
                }
            )
    return result


_CLEANUP: list[Any] = []
#: `--json` keys printed by name (the other `data_*` figures follow them).
_PRINTED = {"data_64k_vs_1k", "data_64k_vs_1k_cpu", "data_64k_vs_1k_range"}


async def _fresh(url: str) -> str:
    """A new empty database of the same kind (the second measurement starts clean)."""
    if make_url(url).get_backend_name() == "sqlite":
        folder = tempfile.mkdtemp(prefix="stateward-bench-")
        _CLEANUP.append(lambda: shutil.rmtree(folder, ignore_errors=True))
        return f"sqlite+aiosqlite:///{folder}/store.db"
    return await _pg_database(os.environ.get("STATEWARD_TEST_POSTGRES_URL") or DEFAULT_PG)


async def _pg_admin(base: str, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(
        make_url(base).set(drivername="postgresql").render_as_string(hide_password=False)
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _pg_database(base: str) -> str:
    name = f"sw_bench_{uuid.uuid4().hex[:12]}"
    await _pg_admin(base, f'CREATE DATABASE "{name}"')

    def drop() -> None:
        asyncio.run(_pg_admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    _CLEANUP.append(drop)
    return make_url(base).set(database=name).render_as_string(hide_password=False)


async def _run(quick: bool) -> dict[str, Any]:
    n, instances, concurrency = (400, 24, 24) if quick else (3000, 24, 24)
    result: dict[str, Any] = {}
    sqlite = await _measure(await _fresh("sqlite+aiosqlite:///x.db"), n, instances, concurrency)
    result["sqlite"] = sqlite
    try:
        pg_url = await _pg_database(os.environ.get("STATEWARD_TEST_POSTGRES_URL") or DEFAULT_PG)
        result["postgres"] = await _measure(pg_url, n, instances, concurrency)
    except (OSError, ImportError) as error:
        print(f"note: PostgreSQL not reachable ({error}); its figures are null", file=sys.stderr)
        result["postgres"] = None
    except Exception as error:  # asyncpg raises its own hierarchy on refused logins
        print(f"note: PostgreSQL part failed ({error}); its figures are null", file=sys.stderr)
        result["postgres"] = None
    result.update(await _variants(quick, 1 if quick else ROUNDS, result["postgres"] is not None))
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table, and with `--json` one JSON object last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer events (< 30 s)")
    parser.add_argument("--json", action="store_true", help="print a JSON object last")
    parser.add_argument(
        "--default-gc",
        action="store_true",
        help="CPython's default collector settings, not the server's (`freeze_heap`)",
    )
    parser.add_argument(
        "--server-cpus", metavar="LIST", default="",
        help="keep this process on these CPUs as STATEWARD_SERVER_CPUS keeps a server",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        cpus = cpu_list("--server-cpus", args.server_cpus)
    except ValueError as error:
        parser.error(str(error))
    if cpus:
        pin_server(cpus)
    if not args.default_gc:
        freeze_heap()
    try:
        result = asyncio.run(_run(args.quick))
    finally:
        for cleanup in reversed(_CLEANUP):
            cleanup()
    for backend in ("sqlite", "postgres"):
        figures = result[backend]
        if figures is None:
            print(f"{backend:9s} skipped")
            continue
        print(
            f"{backend:9s} events/s {figures['events_per_s']:8.0f} (group commit)  "
            f"single {figures['single_events_per_s']:6.0f}  "
            f"bare inserts/s {figures['bare_inserts_per_s']:8.0f}  "
            f"ratio {figures['ratio_vs_bare_insert']:.0%}"
        )
    print(
        f"full_vs_normal {result['full_vs_normal']:.2f} (goal >= 0.3)  data_64k_vs_1k "
        f"{result['data_64k_vs_1k']:.2f} (goal >= 0.9; CPU {result['data_64k_vs_1k_cpu']:.2f})  "
        f"resizing edits {result['data_64k_vs_1k_resize']:.2f} "
        f"(CPU {result['data_64k_vs_1k_resize_cpu']:.2f})  "
        f"data unchanged {result['data_64k_vs_1k_keep']:.2f} "
        f"(CPU {result['data_64k_vs_1k_keep_cpu']:.2f})"
    )
    if args.json:
        sq, pg = result["sqlite"], result["postgres"]
        print(
            json.dumps(
                {
                    "gc": "default" if args.default_gc else "server",
                    "server_cpus": list(cpus),
                    "sqlite_events_per_s": round(sq["events_per_s"], 1),
                    "sqlite_ratio_vs_bare_insert": round(sq["ratio_vs_bare_insert"], 3),
                    "sqlite_single_events_per_s": round(sq["single_events_per_s"], 1),
                    "sqlite_bare_inserts_per_s": round(sq["bare_inserts_per_s"], 1),
                    "postgres_events_per_s": round(pg["events_per_s"], 1) if pg else None,
                    "postgres_ratio_vs_bare_insert": round(pg["ratio_vs_bare_insert"], 3)
                    if pg
                    else None,
                    "postgres_bare_inserts_per_s": round(pg["bare_inserts_per_s"], 1)
                    if pg
                    else None,
                    "full_vs_normal": round(result["full_vs_normal"], 3),
                    "data_64k_vs_1k": round(result["data_64k_vs_1k"], 3),
                    "data_64k_vs_1k_cpu": round(result["data_64k_vs_1k_cpu"], 3),
                    "full_vs_normal_range": [round(v, 3) for v in result["full_vs_normal_range"]],
                    "data_64k_vs_1k_range": [round(v, 3) for v in result["data_64k_vs_1k_range"]],
                    **{
                        key: (
                            [round(v, 3) for v in value]
                            if isinstance(value, list)
                            else round(value, 3)
                        )
                        for key, value in result.items()
                        if key.startswith("data_") and key not in _PRINTED
                    },
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
