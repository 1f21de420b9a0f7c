"""Offline verification speed of an exported log, and the cost of the Merkle log on writes.

- events_per_s: `verify --log` (parse the file, every envelope, chain, signature, engine
  replay, Merkle root against the checkpoint; the per-event checks — envelope parse and
  shape, chain and leaf hashes, Ed25519 — done ahead by worker threads, one per CPU up
  to 4, while the main thread replays) over a log of 20k events (2k with `--quick`):
  self-effect `tick`s on 24 instances plus the registry events before them, written
  through `runtime.act` on SQLite, exported with `log export`;
- bare_verify_per_s: a bare PyNaCl loop (`VerifyKey(signer).verify(envelope, signature)`)
  over the same signatures; ratio = events_per_s / bare_verify_per_s (goal >= 0.7);
- cpu_us_per_event: the CPU (user + system) that `verify --log` spent per event (its
  threads, and any child processes), beside bare_cpu_us_per_event of the bare loop;
  cpu_ratio = bare / verify. On a shared machine this is the steady figure: the wall
  ratio depends on how many of the cores the workers get (on Linux with autogroup
  scheduling, a session's processes share one session's share of the CPU);
- append_overhead: events/s of the store bench's write path (client-signed ticks through
  `act` with group commit, SQLite file) with the Merkle log / without it (the sequencing
  step's log append switched off for the run); goal >= 0.9. Runs alternate with and
  without, three of each, and the medians are compared. The write path runs in this
  process (the server), so its CPU per event is reported too (`append_cpu_us_per_event_*`,
  `append_overhead_cpu` = CPU without ÷ CPU with the log).
- log_step_cpu_us_per_event (`--log-step`, alone): the log's own step, isolated from the
  load-sensitive write path: the events of a database written without the log are
  appended by `LogRepository.sequence` in batches of 10, one transaction each, and the
  CPU per event is compared with the same transactions doing one trivial UPDATE instead
  (`log_step_baseline_cpu_us_per_event`; the step costs about the difference).
Every figure is the median of 3 runs; the min-max spread is printed too, and the load
average.
Usage: `python bench/verify.py [--quick] [--append-only | --log-step] [--json]`; `--json`
prints one JSON object last; `--append-only` runs only the append_overhead part (the
verify figures are then absent).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nacl.signing import VerifyKey
from sqlalchemy import select

from stateward.governance.keys import b64url_decode, generate_keypair
from stateward.persistence.log import PENDING, LogRepository
from stateward.persistence.models import Event
from stateward.records import StoredEvent
from stateward.runtime.access import registry
from stateward.runtime.access.genesis import init
from stateward.runtime.core.act import act
from stateward.runtime.core.commands import sign_as, start_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.checkpoints import checkpoint
from stateward.runtime.insight.logfile import export_lines, read_log
from stateward.runtime.insight.logverify import verify_log
from stateward.settings import Settings

COUNTER = {
    "$version": "2.0",
    "$path": "bench/verify/counter",
    "initial": "open",
    "states": {"open": {"label": "Open"}, "done": {"label": "Done", "terminal": True}},
    "actions": {"tick": {"label": "Tick", "from": "open", "mutate": {"$increment": {"n": 1}}}},
}
INSTANCES = 24


async def _write(url: str, n: int, *, batches: int = 1) -> tuple[Runtime, float, float]:
    """A runtime with `n` ticks written through `act` (group commit); (runtime, events/s,
    CPU seconds per event of this process while writing them)."""
    rt = await Runtime.open(Settings(database_url=url), node_key=generate_keypair())
    operator = generate_keypair()
    await init(rt, operator)
    await registry.deploy_workflow(rt, operator, COUNTER)
    ids = [
        (await start_instance(rt, operator.public, COUNTER["$path"])).record.id
        for _ in range(INSTANCES)
    ]
    signed = [
        sign_as(rt, operator, ids[i % INSTANCES], "tick", COUNTER["$path"], {"i": i})
        for i in range(n)
    ]
    gate = asyncio.Semaphore(INSTANCES)

    async def one(item: Any) -> None:
        async with gate:
            await act(rt, item, attested=False)

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(s) for s in signed))
    return rt, n / (time.perf_counter() - start), (time.process_time() - cpu) / n


async def _export(folder: Path, n: int) -> Path:
    rt, _rate, _cpu = await _write(f"sqlite+aiosqlite:///{folder}/log.db", n)
    out = folder / "log.jsonl"
    try:
        await checkpoint(rt)
        with out.open("w", encoding="utf-8") as handle:
            async for line in export_lines(rt):
                handle.write(json.dumps(line, separators=(",", ":")) + "\n")
    finally:
        await rt.close()
    return out


def _children_cpu() -> float:
    """CPU seconds of this process's finished (and reaped) children."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _verify_rate(path: Path) -> tuple[float, int, float]:
    """(events/s, events, CPU seconds per event of this process and its workers)."""
    children = _children_cpu()
    start, cpu = time.perf_counter(), time.process_time()
    log = read_log(str(path))
    report = verify_log(log, log.checkpoints[-1])
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert report.valid, report.problems[:3]
    while multiprocessing.active_children():  # reap the workers: their CPU is counted
        time.sleep(0.01)
    cpu += _children_cpu() - children
    return len(log.events) / elapsed, len(log.events), cpu / len(log.events)


def _bare_rate(path: Path) -> tuple[float, float]:
    """(verifications/s, CPU seconds per verification) of the bare PyNaCl loop."""
    log = read_log(str(path))
    items = [
        (b64url_decode(e.signer), e.envelope.encode("utf-8"), b64url_decode(e.signature))
        for e in log.events
    ]
    start, cpu = time.perf_counter(), time.process_time()
    for signer, message, signature in items:
        VerifyKey(signer).verify(message, signature)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return len(items) / elapsed, cpu / len(items)


@contextlib.contextmanager
def _without_log() -> Iterator[None]:
    """The write path with the log append switched off (the comparison run only)."""
    original = LogRepository.sequence

    async def skip(self: LogRepository) -> list[int]:
        self.session.info.pop("stateward.log_pending", None)
        return []

    LogRepository.sequence = skip  # type: ignore[method-assign]
    try:
        yield
    finally:
        LogRepository.sequence = original  # type: ignore[method-assign]


async def _append_rate(folder: Path, n: int, tag: str, *, with_log: bool) -> tuple[float, float]:
    url = f"sqlite+aiosqlite:///{folder}/append-{tag}.db"
    with contextlib.nullcontext() if with_log else _without_log():
        rt, rate, cpu = await _write(url, n)
        await rt.close()
    return rate, cpu


STEP_BATCH = 10


async def _step_cpu(url: str, *, with_log: bool) -> float:
    """CPU seconds per event of appending the database's events to the log in
    transactions of `STEP_BATCH` (or of the same transactions with one trivial UPDATE)."""
    rt = await Runtime.open(Settings(database_url=url), node_key=generate_keypair())
    try:
        async with rt.uow(readonly=True) as uow:
            rows = await uow.session.execute(select(Event).order_by(Event.id))
            events = [
                StoredEvent(**{c: getattr(e, c) for c in StoredEvent.__dataclass_fields__})
                for e in rows.scalars()
            ]
        start = time.process_time()
        for i in range(0, len(events), STEP_BATCH):
            async with rt.uow() as uow:
                if with_log:
                    uow.session.info[PENDING] = events[i : i + STEP_BATCH]
                    await uow.log.sequence()
                else:
                    connection = await uow.session.connection()
                    raw = (await connection.get_raw_connection()).driver_connection
                    await raw.execute("UPDATE log_head SET size = size WHERE id = 1")
                await uow.commit()
        return (time.process_time() - start) / len(events)
    finally:
        await rt.close()


async def _log_step(folder: Path, n: int) -> dict[str, Any]:
    """`--log-step`: the log step's CPU per event beside the baseline, 3 alternations on
    fresh copies of one database written without the log."""
    with _without_log():
        rt, _rate, _cpu = await _write(f"sqlite+aiosqlite:///{folder}/step.db", n)
        await rt.close()
    step, base = [], []
    for i in range(3):
        for with_log, out in ((False, base), (True, step)):
            copy = folder / f"step-{i}-{with_log}.db"
            shutil.copy(folder / "step.db", copy)
            out.append(await _step_cpu(f"sqlite+aiosqlite:///{copy}", with_log=with_log) * 1e6)
    return {
        "log_step_cpu_us_per_event": _summary(step),
        "log_step_baseline_cpu_us_per_event": _summary(base),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


async def _run(quick: bool, append_only: bool = False) -> dict[str, Any]:
    n, writes = (2000, 600) if quick else (20000, 3000)
    folder = Path(tempfile.mkdtemp(prefix="stateward-bench-verify-"))
    events = 0
    try:
        path = None if append_only else await _export(folder, n)
        verify_rates: list[float] = []
        bare_rates: list[float] = []
        verify_cpu: list[float] = []
        bare_cpu: list[float] = []
        for _ in range(0 if path is None else 3):
            assert path is not None
            rate, events, cpu = _verify_rate(path)
            verify_rates.append(rate)
            verify_cpu.append(cpu * 1e6)
            rate, cpu = _bare_rate(path)
            bare_rates.append(rate)
            bare_cpu.append(cpu * 1e6)
        with_log, without, with_cpu, without_cpu = [], [], [], []
        # The write path is measured as `serve` runs it: the heap left so far (the
        # export's runtime, the verify rounds) collected and frozen, as `serve` freezes
        # its start-up heap, so the full collections that the writes' garbage triggers
        # walk only what the writes made (else they re-walk the verify part's leftovers,
        # and more often on the side that allocates more: the log's).
        gc.collect()
        gc.freeze()
        for i in range(3):
            rate, cpu = await _append_rate(folder, writes, f"off{i}", with_log=False)
            without.append(rate)
            without_cpu.append(cpu * 1e6)
            rate, cpu = await _append_rate(folder, writes, f"on{i}", with_log=True)
            with_log.append(rate)
            with_cpu.append(cpu * 1e6)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    on, off = _summary(with_log), _summary(without)
    on_cpu, off_cpu = _summary(with_cpu), _summary(without_cpu)
    verified: dict[str, Any] = {}
    if verify_rates:
        v, b = _summary(verify_rates), _summary(bare_rates)
        vc, bc = _summary(verify_cpu), _summary(bare_cpu)
        verified = {
            "events_per_s": v,
            "bare_verify_per_s": b,
            "ratio": v["median"] / b["median"],
            "cpu_us_per_event": vc,
            "bare_cpu_us_per_event": bc,
            "cpu_ratio": bc["median"] / vc["median"],
        }
    return {
        "events": events,
        **verified,
        "append_events_per_s_with_log": on,
        "append_events_per_s_without_log": off,
        "append_overhead": on["median"] / off["median"],
        "append_cpu_us_per_event_with_log": on_cpu,
        "append_cpu_us_per_event_without_log": off_cpu,
        "append_overhead_cpu": off_cpu["median"] / on_cpu["median"],
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def _json(r: dict[str, Any]) -> dict[str, Any]:
    """The `--json` object: medians, with the verify figures' min-max."""

    def med(key: str) -> float:
        return round(r[key]["median"], 1)

    out: dict[str, Any] = {}
    if "ratio" in r:
        out = {
            "events": r["events"],
            "workers": min(os.cpu_count() or 1, 4),
            "events_per_s": med("events_per_s"),
            "events_per_s_min_max": [round(r["events_per_s"][k], 1) for k in ("min", "max")],
            "bare_verify_per_s": med("bare_verify_per_s"),
            "bare_verify_per_s_min_max": [
                round(r["bare_verify_per_s"][k], 1) for k in ("min", "max")
            ],
            "ratio": round(r["ratio"], 3),
            "cpu_us_per_event": med("cpu_us_per_event"),
            "cpu_us_per_event_min_max": [
                round(r["cpu_us_per_event"][k], 1) for k in ("min", "max")
            ],
            "bare_cpu_us_per_event": med("bare_cpu_us_per_event"),
            "cpu_ratio": round(r["cpu_ratio"], 3),
        }
    return {
        **out,
        "append_overhead": round(r["append_overhead"], 3),
        "append_overhead_cpu": round(r["append_overhead_cpu"], 3),
        "append_cpu_us_per_event_with_log": med("append_cpu_us_per_event_with_log"),
        "append_cpu_us_per_event_without_log": med("append_cpu_us_per_event_without_log"),
        "loadavg": r["loadavg"],
        "append_events_per_s_with_log": med("append_events_per_s_with_log"),
        "append_events_per_s_without_log": med("append_events_per_s_without_log"),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table, and with `--json` one JSON object last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2k events instead of 20k")
    parser.add_argument(
        "--append-only", action="store_true", help="only the append_overhead part (no verify)"
    )
    parser.add_argument(
        "--log-step", action="store_true", help="only the log step's own CPU (see the module)"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object last")
    args = parser.parse_args(argv)
    if args.log_step:
        folder = Path(tempfile.mkdtemp(prefix="stateward-bench-step-"))
        try:
            step = asyncio.run(_log_step(folder, 600 if args.quick else 3000))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        s, b = step["log_step_cpu_us_per_event"], step["log_step_baseline_cpu_us_per_event"]
        print(f"log step: {s['median']:.0f} ({s['min']:.0f}-{s['max']:.0f}) us CPU per event, "
              f"baseline {b['median']:.0f} ({b['min']:.0f}-{b['max']:.0f}); "
              f"load average {step['loadavg']}")  # fmt: skip
        if args.json:
            print(json.dumps({
                "log_step_cpu_us_per_event": round(s["median"], 1),
                "log_step_cpu_us_per_event_min_max": [round(s["min"], 1), round(s["max"], 1)],
                "log_step_baseline_cpu_us_per_event": round(b["median"], 1),
                "log_step_baseline_min_max": [round(b["min"], 1), round(b["max"], 1)],
                "loadavg": step["loadavg"],
            }))  # fmt: skip
        return 0
    r = asyncio.run(_run(args.quick, args.append_only))

    def fmt(s: dict[str, float]) -> str:
        return f"{s['median']:8.0f} ({s['min']:.0f}-{s['max']:.0f})"

    if "ratio" in r:
        print(f"verify --log over {r['events']} events: events/s {fmt(r['events_per_s'])}")
        print(f"bare PyNaCl verify:                 /s {fmt(r['bare_verify_per_s'])}")
        print(f"ratio {r['ratio']:.2f} (goal >= 0.7)")
        cpu, bare = fmt(r["cpu_us_per_event"]), fmt(r["bare_cpu_us_per_event"])
        print(f"CPU per event: verify --log {cpu} us (with its workers), "
              f"bare {bare} us; cpu_ratio {r['cpu_ratio']:.2f}")  # fmt: skip
    print(f"write path with log    events/s {fmt(r['append_events_per_s_with_log'])}"
          f", CPU/event {fmt(r['append_cpu_us_per_event_with_log'])} us")  # fmt: skip
    print(f"write path without log events/s {fmt(r['append_events_per_s_without_log'])}"
          f", CPU/event {fmt(r['append_cpu_us_per_event_without_log'])} us")  # fmt: skip
    print(f"append_overhead {r['append_overhead']:.2f} (goal >= 0.9), "
          f"in CPU {r['append_overhead_cpu']:.2f}")  # fmt: skip
    print(f"load average {' '.join(str(x) for x in r['loadavg'])}")
    if args.json:
        print(json.dumps(_json(r)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
