"""Tampering with a database is caught by `verify --db` against a checkpoint taken before
it AND by offline `verify --log` of what the database exports then (SQLite and
PostgreSQL): an edited, deleted or swapped event, a truncation with the process row rolled
back, a whole process deleted, a version's states reordered. Plus the same done to an
exported file."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import text

from stateward.governance.checkpoint import SignedCheckpoint, parse_checkpoint
from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.checkpoints import checkpoint
from stateward.runtime.insight.logfile import export_lines, parse_lines
from stateward.runtime.insight.logverify import verify_database, verify_log
from stateward.runtime.insight.verify import VerificationReport

FLOW = {
    "$version": "2.0",
    "$path": "tamper/flow",
    "initial": "open",
    "states": {"open": {"label": "Open"}, "review": {"label": "Review"},
               "done": {"label": "Done", "terminal": True}},
    "actions": {"submit": {"from": "open", "to": "review", "mutate": {"$set": {"n": "input.n"}}},
                "close": {"from": "review", "to": "done"}},
}  # fmt: skip


class World:
    def __init__(self, rt: Runtime, pids: list[str], cp: SignedCheckpoint, before_last: Any):
        self.rt, self.pids, self.cp, self.before_last = rt, pids, cp, before_last

    async def sql(self, sql: str, **params: Any) -> list[Any]:
        async with self.rt.uow() as uow:
            result = await uow.session.execute(text(sql), params)
            rows = list(result.all()) if result.returns_rows else []
            await uow.commit()
        return rows

    async def indexes(self, pid: str) -> list[int]:
        rows = await self.sql(
            "SELECT n.idx FROM log_nodes n JOIN events e ON e.id = n.event_id "
            "WHERE n.level = 0 AND e.process_id = :p ORDER BY n.idx",
            p=pid,
        )
        return [r[0] for r in rows]


async def _world(rt: Runtime, operator) -> World:  # type: ignore[no-untyped-def]
    await registry.deploy_workflow(rt, operator, FLOW)
    pids = []
    for n in range(3):
        pid = (await start_instance(rt, operator.public, FLOW["$path"], {})).record.id
        await perform_action(rt, operator.public, pid, "submit", {"n": n})
        pids.append(pid)
    async with rt.uow(readonly=True) as uow:
        row = await uow.processes.get(pids[-1])
    await perform_action(rt, operator.public, pids[-1], "close", {})  # the log's last event
    record = await checkpoint(rt)
    assert record is not None
    return World(rt, pids, parse_checkpoint(record.as_json()), row)


async def _edit(w: World) -> int | None:
    await w.sql(
        "UPDATE events SET envelope = replace(envelope, :a, :b), input = :i "
        "WHERE process_id = :p AND seq = 2",
        p=w.pids[1], a='"n":1', b='"n":7', i=json.dumps({"n": 7}),
    )  # fmt: skip
    return None


async def _delete(w: World) -> int | None:
    first = (await w.indexes(w.pids[0]))[1]
    await w.sql("DELETE FROM log_nodes WHERE level = 0 AND idx = :i", i=first)
    await w.sql("DELETE FROM events WHERE process_id = :p AND seq = 2", p=w.pids[0])
    return first


async def _swap(w: World) -> int | None:
    """Events 2 and 3 of one process trade places (their seq numbers)."""
    pid = w.pids[-1]
    for old, new in ((2, 99), (3, 2), (99, 3)):
        await w.sql("UPDATE events SET seq = :n WHERE process_id = :p AND seq = :o",
                    p=pid, o=old, n=new)  # fmt: skip
    return None


async def _truncate(w: World) -> int | None:
    pid, row = w.pids[-1], w.before_last
    last = (await w.indexes(pid))[-1]
    await w.sql("DELETE FROM log_nodes WHERE level = 0 AND idx >= :i", i=last)
    await w.sql("DELETE FROM events WHERE process_id = :p AND seq = :s", p=pid, s=row.seq + 1)
    await w.sql(
        "UPDATE processes SET seq = :s, state = :st, status = :su, head_hash = :h WHERE id = :p",
        s=row.seq, st=row.state, su=row.status, h=row.head_hash, p=pid,
    )  # fmt: skip
    await w.sql(
        "UPDATE process_data SET data = :d WHERE process_id = :p", d=json.dumps(row.data), p=pid
    )
    await w.sql("UPDATE log_head SET size = :i", i=last)
    return last


async def _delete_process(w: World) -> int | None:
    pid = w.pids[1]
    first = (await w.indexes(pid))[0]
    for sql in (
        "DELETE FROM log_nodes WHERE event_id IN (SELECT id FROM events WHERE process_id = :p)",
        "DELETE FROM assignments WHERE process_id = :p",
        "DELETE FROM schedules WHERE process_id = :p",
        "DELETE FROM state_visits WHERE process_id = :p",
        "DELETE FROM events WHERE process_id = :p",
        "DELETE FROM processes WHERE id = :p",
    ):
        await w.sql(sql, p=pid)
    return first


async def _reorder_states(w: World) -> int | None:
    reordered = {**FLOW, "states": dict(reversed(list(FLOW["states"].items())))}
    await w.sql(
        "UPDATE workflow_versions SET definition = :d WHERE path = :p",
        d=json.dumps(reordered), p=FLOW["$path"],
    )  # fmt: skip
    w.rt.definitions.limit = 0
    return None


TAMPERS: dict[str, Callable[[World], Awaitable[int | None]]] = {
    "edit": _edit,
    "delete": _delete,
    "swap": _swap,
    "truncate-and-roll-back": _truncate,
    "delete-process": _delete_process,
    "reorder-states": _reorder_states,
}


def _lines(report: VerificationReport) -> list[str]:
    return [p.line() for p in report.problems]


@pytest.mark.parametrize("kind", list(TAMPERS))
async def test_tampering_is_caught_against_an_earlier_checkpoint_and_offline(
    admin_rt, operator, kind
):
    w = await _world(admin_rt, operator)
    assert (await verify_database(admin_rt, w.cp)).valid
    first_missing = await TAMPERS[kind](w)
    report = await verify_database(admin_rt, w.cp)
    assert not report.valid, kind
    if first_missing is not None:
        assert any(f"first missing log index {first_missing}" in x for x in _lines(report)), _lines(
            report
        )
    if kind == "reorder-states":
        assert {p.code for p in report.problems} == {"WORKFLOW_MISMATCH"}, _lines(report)
        return  # the export is rebuilt from the signed events: see the file test below
    log = parse_lines([json.dumps(x) async for x in export_lines(admin_rt)])
    offline = verify_log(log, w.cp, workers=1)
    assert not offline.valid, kind
    if first_missing is not None:
        assert any(f"first missing log index {first_missing}" in x for x in _lines(offline))


async def test_tampering_with_an_exported_file_is_caught_offline(admin_rt, operator):
    w = await _world(admin_rt, operator)
    lines = [x async for x in export_lines(admin_rt)]
    assert verify_log(parse_lines(json.dumps(x) for x in lines), w.cp, workers=1).valid
    events = [n for n, x in enumerate(lines) if "index" in x]
    deploy = next(n for n, x in enumerate(lines) if x.get("action") == "add_workflow")
    edited = next(n for n, x in enumerate(lines) if x.get("process") == w.pids[1] and x["seq"] == 2)

    def reorder(x: dict[str, Any]) -> dict[str, Any]:
        env = json.loads(x["envelope"])
        env["action"]["input"]["order"]["states"].reverse()
        return {**x, "envelope": json.dumps(env, sort_keys=True, separators=(",", ":"))}

    variants: dict[str, list[dict[str, Any]]] = {
        "edit": [({**x, "envelope": x["envelope"].replace('"n":1', '"n":7')}
                  if n == edited else x) for n, x in enumerate(lines)],
        "delete": [x for n, x in enumerate(lines) if n != events[3]],
        "swap": [lines[events[4]] if n == events[3] else lines[events[3]] if n == events[4]
                 else x for n, x in enumerate(lines)],
        "truncate": [x for n, x in enumerate(lines) if n != events[-1]],
        "delete-process": [x for x in lines if x.get("process") != w.pids[0]],
        "reorder-states": [reorder(x) if n == deploy else x for n, x in enumerate(lines)],
    }  # fmt: skip
    for kind, tampered in variants.items():
        report = verify_log(parse_lines(json.dumps(x) for x in tampered), w.cp, workers=1)
        assert not report.valid, kind


async def test_worker_threads_report_the_same_findings_on_a_tampered_file(
    admin_rt, operator, monkeypatch
):
    """The per-event checks done ahead in worker threads (chunk by chunk; tiny chunks
    here, so chunk edges fall inside the tampering) give exactly the findings, in the same
    order, as the checks done inline."""
    from stateward.runtime.insight import logverify

    monkeypatch.setattr(logverify, "CHUNK", 3)
    w = await _world(admin_rt, operator)
    lines = [x async for x in export_lines(admin_rt)]
    events = [n for n, x in enumerate(lines) if "index" in x]
    edited = next(n for n, x in enumerate(lines) if x.get("process") == w.pids[1] and x["seq"] == 2)

    def change(n: int, **fields: Any) -> list[dict[str, Any]]:
        return [{**x, **fields} if i == n else x for i, x in enumerate(lines)]

    sig = lines[events[5]]["signature"]
    spaced = json.dumps(json.loads(lines[events[6]]["envelope"]), sort_keys=True)
    variants: dict[str, list[dict[str, Any]]] = {
        "edit": change(edited, envelope=lines[edited]["envelope"].replace('"n":1', '"n":7')),
        "forged": change(events[5], signature=("A" if sig[0] != "A" else "B") + sig[1:]),
        "not-canonical": change(events[6], envelope=spaced),
        "unreadable": change(events[7], envelope="{not json"),
        "other-process": change(events[8], process=w.pids[0]),
        "swap": [lines[events[4]] if n == events[3] else lines[events[3]] if n == events[4]
                 else x for n, x in enumerate(lines)],
        "delete-process": [x for x in lines if x.get("process") != w.pids[0]],
    }  # fmt: skip
    for kind, tampered in variants.items():
        texts = [json.dumps(x) for x in tampered]
        inline = verify_log(parse_lines(texts), w.cp, workers=1)
        pooled = verify_log(parse_lines(texts), w.cp, workers=2, parallel_from=0)
        assert not inline.valid, kind
        assert _lines(pooled) == _lines(inline), kind
        assert (pooled.events_checked, pooled.processes_checked) == (
            inline.events_checked, inline.processes_checked,
        ), kind  # fmt: skip
