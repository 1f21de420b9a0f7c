"""The runtime half of the Starlark `workflow` module (seed §10, issue 13).

The worker has no way back to the server, so before a hook runs, `world` loads all it may
read: its instance and that instance's children (oldest first, at most `MAX_CHILDREN`
and `MAX_WORLD_BYTES` of data, the rest named as omitted: HOOK_LIMIT when used; a child
in another namespace only while the parent's namespace may spawn it, the rule of
`$child`), each with its seq and open assignments. Nothing else is sent, so another
tenant's instance is unreachable and refused as `HOOK_SCOPE` exactly like an id that does
not exist. The worker answers `workflow.*` from it and returns the record of the calls,
which `automation.automate` stores in the `$automate` event.

`check_reads` (in the `$automate` transaction) refuses the event as stale when a child
the hook read has moved on since, so the hook is re-run on fresh state (at most
`STALE_RETRIES` times). After the commit, `follow_up` appends one `$hook_write` system
event per child the hook wrote or advanced, through the one write path (`system_act`);
it carries `after` = the seq the hook read, and `op_hook_write` refuses it (not due)
when the child moved in between: no write ever lands on a state the hook did not see.

That same check makes re-sending follow-ups always safe (one that was applied moved the
child past `after`), so `recover_follow_ups` (run by the automation recovery sweep)
re-sends those of recent `$automate` events whose children are still at the seq read:
exactly the ones a crash between the two commits lost.
"""

from __future__ import annotations

import json
import logging
import weakref
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from stateward.domain.errors import FORBIDDEN, DomainError
from stateward.domain.hookcalls import HOOK_WRITE, WORKFLOW_KEY
from stateward.domain.lifecycle import AUTOMATE
from stateward.domain.model import SYSTEM_ACTOR, Outcome
from stateward.persistence import UnitOfWork
from stateward.persistence.models import Event
from stateward.records import AssignmentRecord, ProcessRecord
from stateward.runtime.core import references
from stateward.runtime.core.kernel import ActContext, apply_engine
from stateward.runtime.core.ops_support import (
    is_not_due,
    not_due,
    require_instance,
    require_system,
    system_act,
)
from stateward.runtime.core.services import Runtime

log = logging.getLogger(__name__)

#: Children of one instance a hook can reach (the oldest ones), and the bytes (JSON data)
#: of the children sent to the worker; a child left out is HOOK_LIMIT when named.
MAX_CHILDREN = 200
MAX_WORLD_BYTES = 8 * 1024 * 1024
#: Ids of left-out children the worker is told about (beyond: HOOK_SCOPE).
MAX_OMITTED = 10_000
#: Re-runs of a hook whose reads went stale before its event was recorded.
STALE_RETRIES = 3
#: `not_due` detail of an `$automate` whose reads went stale (re-run, not skipped).
STALE_READ = "stale_read"
#: How far back a node's first sweep looks for `$automate` events whose follow-ups a
#: crash may have lost (later sweeps continue where the last one ended).
FOLLOW_UP_LOOKBACK = timedelta(minutes=10)
#: Per runtime (by id, checked by a weak reference: a Runtime is not hashable).
_swept: dict[int, tuple[weakref.ref[Runtime], datetime]] = {}


def _last_sweep(runtime: Runtime) -> datetime | None:
    held = _swept.get(id(runtime))
    return held[1] if held is not None and held[0]() is runtime else None


def _note_sweep(runtime: Runtime, when: datetime) -> None:
    for key, (ref, _) in list(_swept.items()):
        if ref() is None:
            del _swept[key]
    _swept[id(runtime)] = (weakref.ref(runtime), when)


def _instance(row: ProcessRecord) -> dict[str, Any]:
    return {
        "id": row.id,
        "workflow": row.workflow,
        "version": row.workflow_version,
        "state": row.state,
        "status": row.status,
        "seq": row.seq,
        "data": dict(row.data),
        "metadata": dict(row.instance_metadata or {}),
        "parent_id": row.parent_id,
    }


def _assignment(a: AssignmentRecord) -> dict[str, Any]:
    return {
        "id": a.id,
        "state": a.state,
        "team": a.team,
        "status": a.status,
        "assignee": a.assignee,
        "created_at": a.created_at.isoformat(),
    }


async def world(uow: UnitOfWork, process: ProcessRecord) -> dict[str, Any]:
    """What a hook of `process` may read through `workflow.*` (the worker's "world")."""
    rows = (await uow.processes.children_by_parents([process.id])).get(process.id, [])
    children: list[ProcessRecord] = []
    omitted: list[str] = []
    size = 0
    for child in rows:
        if not await references.may_spawn(uow, process.namespace, child.workflow):
            continue  # as invisible as another tenant's instance
        size += len(json.dumps(child.data, ensure_ascii=False)) if not omitted else 0
        if omitted or len(children) >= MAX_CHILDREN or size > MAX_WORLD_BYTES:
            if len(omitted) < MAX_OMITTED:
                omitted.append(child.id)
            continue
        children.append(child)
    me = _instance(process)
    me["children"] = [c.id for c in children]
    instances = {process.id: me, **{c.id: _instance(c) for c in children}}
    open_ = await uow.assignments.assignments_by_process(instances, open_only=True)
    return {
        "self": process.id,
        "instances": instances,
        "omitted": omitted,
        "assignments": {pid: [_assignment(a) for a in open_.get(pid, [])] for pid in instances},
    }


async def check_reads(ctx: ActContext, record: Any) -> None:
    """Refuse the `$automate` (not due, `stale_read`) when an instance the hook read other
    than its own (checked by `after`) is no longer at the seq it read."""
    if not isinstance(record, dict):
        return
    read = {
        r["id"]: r.get("seq")
        for r in record.get("reads") or []
        if isinstance(r, dict) and isinstance(r.get("id"), str) and r["id"] != ctx.envelope.process
    }
    if not read:
        return
    rows = await ctx.uow.processes.processes_by_ids(list(read))
    moved = sorted(i for i, seq in read.items() if i not in rows or rows[i].seq != seq)
    if moved:
        error = not_due(f"the hook read {moved[0]} at seq {read[moved[0]]}; it has moved on")
        error.details["reason"] = STALE_READ
        raise error


def is_stale_read(error: DomainError) -> bool:
    """True for the refusal of `check_reads`."""
    return error.details.get("reason") == STALE_READ


async def op_hook_write(ctx: ActContext) -> Outcome:
    """`$hook_write {by, at, after, data?, advance?}` (system): a parent's hook wrote or
    advanced this child. Not due when the child moved past `after` (the seq the hook read);
    FORBIDDEN when `by` is not the child's parent."""
    require_system(ctx)
    process = require_instance(ctx)
    if process.parent_id is None or ctx.input.get("by") != process.parent_id:
        raise DomainError(FORBIDDEN, f"{process.id} is not a child of {ctx.input.get('by')!r}")
    if ctx.input.get("after") != process.seq:
        raise not_due(
            f"{process.id} moved on since the hook read it (seq {process.seq}, read "
            f"{ctx.input.get('after')})"
        )
    return apply_engine(ctx)


async def follow_up(runtime: Runtime, parent: str, at: int, record: dict[str, Any]) -> list[str]:
    """Append the `$hook_write` of each child the recorded hook wrote or advanced (in the
    order of the hook's calls); returns the children whose event was refused (logged)."""
    reads = {r["id"]: r["seq"] for r in record.get("reads", [])}
    writes = {w["id"]: w["data"] for w in record.get("writes", []) if w["id"] != parent}
    advances = [a for a in record.get("advances", []) if a != parent]
    refused: list[str] = []
    for child in dict.fromkeys([*writes, *advances]):
        payload: dict[str, Any] = {"by": parent, "at": at, "after": reads.get(child)}
        if child in writes:
            payload["data"] = writes[child]
        if child in advances:
            payload["advance"] = True
        async with runtime.uow(readonly=True) as uow:
            row = await uow.processes.get(child)
        if row is None:
            refused.append(child)
            continue
        try:
            await system_act(runtime, child, row.workflow, HOOK_WRITE, payload)
        except DomainError as error:
            refused.append(child)
            reason = "moved on" if is_not_due(error) else f"{error.code}: {error.message}"
            log.warning("hook write of %s by %s (seq %s) refused: %s", child, parent, at, reason)
    return refused


async def recover_follow_ups(runtime: Runtime, until: datetime, limit: int = 500) -> list[str]:
    """Re-send the lost `$hook_write` follow-ups of the `$automate` events recorded before
    `until` (and since this node's last sweep, or `FOLLOW_UP_LOOKBACK`); returns the
    children written. Reads the system actor's events by time (an index range)."""
    since = _last_sweep(runtime) or until - FOLLOW_UP_LOOKBACK
    if until <= since:
        return []
    async with runtime.uow(readonly=True) as uow:
        stmt = (
            select(Event.process_id, Event.seq, Event.input, Event.recorded_at)
            .where(Event.actor == SYSTEM_ACTOR, Event.recorded_at >= since)
            .where(Event.recorded_at < until, Event.action == AUTOMATE)
            .order_by(Event.recorded_at, Event.id)
            .limit(limit)
        )
        rows = list(await uow.session.execute(stmt))
        pending: list[tuple[str, int, dict[str, Any]]] = []
        for parent, seq, input, _ in rows:
            record = input.get(WORKFLOW_KEY) if isinstance(input, dict) else None
            if isinstance(record, dict) and (
                record.get("advances") or any(w.get("id") != parent for w in record["writes"])
            ):
                pending.append((parent, seq, record))
        ids = {w["id"] for _, _, r in pending for w in r["writes"]}
        ids.update(a for _, _, r in pending for a in r["advances"])
        current = await uow.processes.processes_by_ids(list(ids))
    # Where this sweep ended: after the last row when the page was full, else `until`.
    _note_sweep(runtime, rows[-1][3] if len(rows) >= limit else until)
    written: list[str] = []
    for parent, seq, record in pending:
        reads = {r["id"]: r["seq"] for r in record.get("reads", [])}
        lost = [
            c for c, at in reads.items()
            if c != parent and c in current and current[c].seq == at
        ]  # fmt: skip
        if not lost:
            continue
        keep = set(lost)
        subset = {
            "reads": record.get("reads", []),
            "writes": [w for w in record["writes"] if w["id"] in keep],
            "advances": [a for a in record["advances"] if a in keep],
        }
        refused = await follow_up(runtime, parent, seq, subset)
        written.extend(c for c in lost if c not in refused and _touched(subset, c))
    return written


def _touched(record: dict[str, Any], child: str) -> bool:
    return child in record["advances"] or any(w["id"] == child for w in record["writes"])
