"""Parallel work and its join (DSL 2.1): children bookkeeping, `$child` and `await`.

A parent records every child it spawns in its own data, under the engine-owned key
`$children` (`{child id: {workflow, status, result}}`), so the parent's view lists its
children with their status and `verify` rebuilds it from the parent's log alone. A state
with `await: {"children": "all" | "any" | n, "then": "<action>"}` joins the children
spawned by the event that entered it (and by events while it stays there): they are
listed under `$await` (`{state, children: [ids], fired}`).

When a child ends, the runtime appends one `$child` event to the parent (system; input
`{child, workflow, status, result}` where `result` holds the child's terminal state's
`returns` keys). `child_done` records it and, the first time the join condition holds,
performs the `then` action as `system` in that same event with input
`{"children": [{id, workflow, status, result}, ...]}` — so the join fires exactly once:
the parent's events are serialized by its seq, and `fired` is part of its data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from stateward.domain import events as ev
from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.model import (
    ERROR,
    LIVE_STATUSES,
    Actor,
    AwaitSpec,
    Definition,
    DomainEvent,
    Outcome,
    ProcessSnapshot,
    SpawnEffect,
    StateDef,
)

CHILD = "$child"
CHILDREN_KEY = "$children"
AWAIT_KEY = "$await"
#: A spawned child's copy of its parent's data at the spawn (what `parent.*` reads).
PARENT_KEY = "$parent"
#: Statuses of a child that count as ended for a join. `error` counts: nothing but a
#: cancel moves an instance out of it (and a cancel counts too), so a parent waiting for
#: an errored child would wait for a human; its `then` sees each child's status instead.
FINISHED = ("completed", "cancelled", "error")
#: Keys of the parent's data never copied into a child's `$parent` snapshot.
ENGINE_KEYS = (CHILDREN_KEY, AWAIT_KEY, PARENT_KEY)
SYSTEM = Actor(id="system")


def record_spawns(
    data: dict[str, Any], spawns: tuple[SpawnEffect, ...], state: StateDef | None
) -> None:
    """Add spawned children to `$children` (status `active`) and, when `state` (the state
    the parent is in after the event) awaits, to its join."""
    if not spawns:
        return
    children = dict(data.get(CHILDREN_KEY) or {})
    for spawn in spawns:
        children[spawn.child_id] = {"workflow": spawn.workflow, "status": "active", "result": None}
    data[CHILDREN_KEY] = children
    if state is None or state.await_ is None:
        return
    join = data.get(AWAIT_KEY)
    if not isinstance(join, Mapping) or join.get("state") != state.key or join.get("fired"):
        join = {"state": state.key, "children": [], "fired": False}
    ids = [*join.get("children", ()), *(s.child_id for s in spawns)]
    data[AWAIT_KEY] = {**join, "children": ids}


def enter_await(data: dict[str, Any], left: str, state: StateDef | None) -> None:
    """Leaving a state drops its join; entering an awaiting state starts a new one."""
    join = data.get(AWAIT_KEY)
    if isinstance(join, Mapping) and join.get("state") == left:
        data.pop(AWAIT_KEY, None)
    if state is not None and state.await_ is not None and AWAIT_KEY not in data:
        data[AWAIT_KEY] = {"state": state.key, "children": [], "fired": False}


def parent_snapshot(data: Mapping[str, Any]) -> dict[str, Any]:
    """The parent data a child sees as `parent.*` (engine keys left out)."""
    return {k: v for k, v in data.items() if k not in ENGINE_KEYS}


def joined(spec: AwaitSpec, join: Mapping[str, Any], children: Mapping[str, Any]) -> bool:
    """True when the join condition holds for the children listed in `join`."""
    ids = list(join.get("children") or ())
    if not ids:
        return False
    done = sum(1 for i in ids if (children.get(i) or {}).get("status") in FINISHED)
    if spec.children == "all":
        return done == len(ids)
    if spec.children == "any":
        return done >= 1
    return done >= int(spec.children)


def child_done(
    definition: Definition,
    process: ProcessSnapshot,
    payload: Mapping[str, Any],
    *,
    ts: str,
    event_id: str,
    perform: Any,
) -> Outcome:
    """`$child {child, workflow, status, result}`: record a child's end on its parent and
    fire the join when it now holds (`perform` is `transition.perform`)."""
    child = payload.get("child")
    status = payload.get("status")
    if not isinstance(child, str) or status not in FINISHED:
        raise DomainError(
            INVALID_INPUT, "$child needs {child: <id>, status: completed|cancelled|error}"
        )
    data = dict(process.data)
    children = dict(data.get(CHILDREN_KEY) or {})
    entry = dict(children.get(child) or {"workflow": payload.get("workflow")})
    entry.update(status=status, result=payload.get("result"))
    children[child] = entry
    data[CHILDREN_KEY] = children
    details = {ev.D_CHILDREN: [child], "status": status}
    updated = DomainEvent(ev.WORKFLOW_UPDATED, process.state, process.state, None, details)
    recorded = Outcome(CHILD, process.state, process.state, process.status, data, events=(updated,))
    if process.status not in LIVE_STATUSES:
        return recorded  # a finished parent still records its child, nothing else
    state = definition.states.get(process.state)
    join = data.get(AWAIT_KEY)
    if (
        state is None
        or state.await_ is None
        or not isinstance(join, Mapping)
        or join.get("state") != state.key
        or join.get("fired")
        or child not in (join.get("children") or ())
        or not joined(state.await_, join, children)
    ):
        return recorded
    data[AWAIT_KEY] = {**join, "fired": True}
    results = [
        {"id": i, **{k: (children.get(i) or {}).get(k) for k in ("workflow", "status", "result")}}
        for i in join.get("children") or ()
    ]
    interim = replace(process, data=data)
    try:
        then = perform(
            definition, interim, state.await_.then, {"children": results}, SYSTEM, ts, event_id,
            authorize=False,
        )  # fmt: skip
    except DomainError as exc:  # the child's end stands; the parent reports the failed join
        reason = {ev.D_REASON: f"await then {state.await_.then!r}: {exc.code}: {exc.message}"}
        error = DomainEvent(ev.WORKFLOW_ERROR, process.state, process.state, None, reason)
        return Outcome(CHILD, process.state, process.state, ERROR, data, events=(updated, error))
    return Outcome(
        then.action, process.state, then.state, then.status, then.data, then.effects,
        (updated, *then.events),
    )  # fmt: skip


def returns_of(state: StateDef | None, data: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a child hands its parent when it ends in `state`: its `returns` keys."""
    if state is None or not state.returns:
        return None
    return {key: data.get(key) for key in state.returns}
