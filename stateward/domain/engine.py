"""The pure engine (DESIGN §5): `apply(process, event, definition) -> Outcome`.

The engine's one public module. `apply` dispatches a logged event by its action name:
kernel operations (`$start`, `$cancel`, `$automate`, `$complete`, `$timer`, `$message`,
`$advance`, `$stale`, `$hook_write`, `$retry`, `$resolve`, and the row-only `$claim`,
`$unclaim`, `$assignment_cancel`, `$entry_token`, `$sla`, `$webhook`) and business
actions (their own names, including generated branch actions `<state>#<n>` that an
`advance` resolved to). It is what the runtime calls for every event and what
`stateward verify` replays: same snapshot + same event = same outcome. A `DomainError`
means the event is rejected and nothing changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stateward.domain import events as ev
from stateward.domain.autotransition import follow
from stateward.domain.errors import CONFLICT, INVALID_INPUT, NOT_FOUND, DomainError
from stateward.domain.frozen import quick_init
from stateward.domain.hookcalls import HOOK_WRITE, hook_write
from stateward.domain.incidents import (
    RESOLVE,
    RETRY,
    WEBHOOK,
    resolve,
    retry,
    timer_failed,
    webhook,
)
from stateward.domain.joins import CHILD, child_done
from stateward.domain.lifecycle import (
    AUTOMATE,
    CANCEL,
    MAX_AUTOMATION_CHAIN,
    STALE_OP,
    automate,
    cancel,
    fail,
    mark_stale,
)
from stateward.domain.messages import MESSAGE_OP, message_action
from stateward.domain.model import ACTIVE, Actor, Definition, DomainEvent, Outcome, ProcessSnapshot
from stateward.domain.plan import is_bootstrap, plan_for
from stateward.domain.timeouts import arm_timers
from stateward.domain.transition import START, advance, perform, start

ADVANCE = "$advance"
COMPLETE = "$complete"
TIMER = "$timer"
SLA = "$sla"
CLAIM = "$claim"
UNCLAIM = "$unclaim"
ASSIGNMENT_CANCEL = "$assignment_cancel"
ENTRY_TOKEN = "$entry_token"
#: Evaluated by `domain.migration.migrate` (two definitions), never by `apply`.
MIGRATE = "$migrate"
#: Every reserved name a log may hold (DSL action keys can never start with `$`).
KERNEL_OPS = frozenset(
    {START, CANCEL, AUTOMATE, ADVANCE, COMPLETE, TIMER, SLA, CLAIM, UNCLAIM}
    | {ASSIGNMENT_CANCEL, ENTRY_TOKEN, STALE_OP, CHILD, MESSAGE_OP, MIGRATE, HOOK_WRITE}
    | {RETRY, RESOLVE, WEBHOOK}
)
_ROW_ONLY_EVENTS = {
    CLAIM: ev.WORKFLOW_CLAIMED,
    UNCLAIM: ev.WORKFLOW_UNCLAIMED,
    ASSIGNMENT_CANCEL: ev.ASSIGNMENT_CANCELLED,
}


@quick_init
@dataclass(frozen=True)
class EngineEvent:
    """What the engine needs of a logged event: its action name and input, who, when,
    and its id (sha256 of the canonical envelope; seeds child ids)."""

    action: str
    actor: Actor
    ts: str
    event_id: str
    input: Mapping[str, Any] = field(default_factory=dict)
    process_id: str = ""


def apply(
    process: ProcessSnapshot | None,
    event: EngineEvent,
    definition: Definition,
    *,
    authorize: bool = True,
) -> Outcome:
    """Apply one event to a process (None before `$start`) and return the outcome.

    `authorize=False` skips the audience/role/claim rules (for a replay whose actors'
    roles at the time are not reconstructed); every other rule still applies.
    """
    outcome = _apply(process, event, definition, authorize)
    if plan_for(definition).auto:
        outcome = follow(definition, process, outcome, event.ts, event.event_id, event.process_id)
    before = process.state if process is not None else None
    return arm_timers(definition, before, outcome, event.ts, timed=plan_for(definition).timed)


def _apply(
    process: ProcessSnapshot | None,
    event: EngineEvent,
    definition: Definition,
    authorize: bool,
) -> Outcome:
    """`apply` before the state and idle timers are added."""
    name, payload = event.action, event.input
    if not isinstance(payload, Mapping):
        raise DomainError(INVALID_INPUT, "event input must be an object")
    if name == START:
        if process is not None:
            raise DomainError(CONFLICT, f"process {process.id} already exists")
        if not isinstance(payload.get("metadata", {}), Mapping):
            raise DomainError(INVALID_INPUT, "metadata must be an object", pointer="/metadata")
        return start(
            definition,
            process_id=event.process_id,
            data=payload.get("data", {}),
            actor=event.actor,
            ts=event.ts,
            event_id=event.event_id,
            authorize=authorize,
            parent=_opt_map(payload, "parent_data"),
        )
    if process is None:
        if not is_bootstrap(definition) or name.startswith("$"):
            raise DomainError(NOT_FOUND, f"process {event.process_id or '?'} does not exist")
        return _create_registry(event, definition, authorize)
    if not name.startswith("$"):
        return perform(
            definition, process, name, payload, event.actor, event.ts, event.event_id,
            authorize=authorize,
        )  # fmt: skip
    return _kernel(process, event, definition, authorize)


def _kernel(
    process: ProcessSnapshot, event: EngineEvent, definition: Definition, authorize: bool
) -> Outcome:
    """Dispatch a kernel operation (a `$`-name other than `$start`)."""
    name, payload, actor, ts, eid = (
        event.action, event.input, event.actor, event.ts, event.event_id
    )  # fmt: skip
    if name == CANCEL:
        return cancel(
            definition, process, actor, ts, reason=_opt_str(payload, "reason"), authorize=authorize
        )
    if name == ADVANCE:
        return advance(definition, process, payload, actor, ts, eid, authorize=authorize)
    if name == AUTOMATE:
        hook = _opt_str(payload, "hook")
        if "error" in payload:
            return fail(definition, process, str(payload["error"]), hook=hook)
        return automate(
            definition, process, payload.get("result"), ts=ts, event_id=eid, input=payload,
            hook=hook,
        )  # fmt: skip
    if name == TIMER:
        action = payload.get("action")
        if not isinstance(action, str):
            raise DomainError(INVALID_INPUT, "$timer needs an action", pointer="/action")
        if "failed" in payload:  # issue 15: the runtime recorded the action's failure
            return timer_failed(process, payload)
        timer_input = payload.get("input") or {}
        return perform(
            definition, process, action, timer_input, actor, ts, eid, authorize=authorize
        )
    if name == MESSAGE_OP:
        action, message_input = message_action(definition, payload)
        return perform(
            definition, process, action, message_input, actor, ts, eid, authorize=authorize
        )
    if name == COMPLETE:
        return _complete(process, event, definition, authorize)
    if name == RETRY:  # issue 15: an operator re-runs the failed hook
        return retry(definition, process, payload, actor, ts, eid)
    if name == RESOLVE:  # issue 15: an operator cancels or performs an action instead
        return resolve(definition, process, payload, actor, ts, eid)
    if name == WEBHOOK:  # issue 15: a webhook delivery's end (row-only)
        return webhook(process, payload)
    if name == STALE_OP:
        return mark_stale(process)
    if name == HOOK_WRITE:
        return hook_write(definition, process, payload, ts=ts, event_id=eid)
    if name == CHILD:
        return child_done(definition, process, payload, ts=ts, event_id=eid, perform=perform)
    if name in _ROW_ONLY_EVENTS or name in (SLA, ENTRY_TOKEN):
        return _row_only(process, name, payload)
    raise DomainError(NOT_FOUND, f"unknown kernel operation {name!r}")


def _complete(
    process: ProcessSnapshot, event: EngineEvent, definition: Definition, authorize: bool
) -> Outcome:
    """`$complete` `{assignment, reviewData, action?, input?}`: perform `action` (or
    advance when absent) with `input` plus `reviewData`; adds `assignment.completed`."""
    payload = event.input
    action_input = dict(payload.get("input") or {})
    action_input.setdefault("reviewData", payload.get("reviewData"))
    action = payload.get("action")
    if action is None:
        outcome = advance(
            definition, process, action_input, event.actor, event.ts, event.event_id,
            authorize=authorize,
        )  # fmt: skip
    elif isinstance(action, str) and not action.startswith("$"):
        outcome = perform(
            definition, process, action, action_input, event.actor, event.ts, event.event_id,
            authorize=authorize,
        )  # fmt: skip
    else:
        raise DomainError(
            INVALID_INPUT, "$complete action must be an action name", pointer="/action"
        )
    details = {ev.D_ASSIGNMENT: payload.get("assignment")}
    done = DomainEvent(ev.ASSIGNMENT_COMPLETED, process.state, process.state, None, details)
    return Outcome(
        outcome.action, outcome.from_state, outcome.state, outcome.status, outcome.data,
        outcome.effects, (done, *outcome.events),
    )  # fmt: skip


def _row_only(process: ProcessSnapshot, name: str, payload: Mapping[str, Any]) -> Outcome:
    """Kernel ops that change only the runtime's rows: data, state and status stay."""
    domain_events: tuple[DomainEvent, ...] = ()
    details = {ev.D_ASSIGNMENT: payload.get("assignment")} if "assignment" in payload else {}
    if name in _ROW_ONLY_EVENTS:
        domain_events = (
            DomainEvent(_ROW_ONLY_EVENTS[name], process.state, process.state, None, details),
        )
    elif name == SLA:
        kind = payload.get("kind")
        if kind not in ("warning", "breach", "breached"):
            raise DomainError(INVALID_INPUT, "$sla kind must be warning or breach", pointer="/kind")
        event_type = ev.SLA_WARNING if kind == "warning" else ev.SLA_BREACHED
        domain_events = (DomainEvent(event_type, process.state, process.state, None, details),)
    return Outcome(
        name, process.state, process.state, process.status, process.data, events=domain_events
    )


def _create_registry(event: EngineEvent, definition: Definition, authorize: bool) -> Outcome:
    """A registry is created by the first governance event that targets it: an implicit
    `$start` (empty data) followed by the action; the outcome carries both events."""
    begun = start(
        definition, process_id=event.process_id, data={}, actor=event.actor, ts=event.ts,
        event_id=event.event_id,
    )  # fmt: skip
    snapshot = ProcessSnapshot(
        id=event.process_id, workflow=definition.path or "", version=0, state=begun.state,
        status=ACTIVE, data=begun.data, started_by=event.actor.id,
    )  # fmt: skip
    outcome = perform(
        definition, snapshot, event.action, event.input, event.actor, event.ts, event.event_id,
        authorize=authorize,
    )  # fmt: skip
    return Outcome(
        outcome.action, outcome.from_state, outcome.state, outcome.status, outcome.data,
        outcome.effects, (*begun.events, *outcome.events),
    )  # fmt: skip


def _opt_map(payload: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """`payload[key]` when it is an object, else None."""
    value = payload.get(key)
    return value if isinstance(value, Mapping) else None


def _opt_str(payload: Mapping[str, Any], key: str) -> str | None:
    """`payload[key]` when it is a string, else None."""
    value = payload.get(key)
    return value if isinstance(value, str) else None


__all__ = [
    "ADVANCE",
    "COMPLETE",
    "KERNEL_OPS",
    "MAX_AUTOMATION_CHAIN",
    "START",
    "EngineEvent",
    "advance",
    "apply",
    "automate",
    "cancel",
    "fail",
    "mark_stale",
    "perform",
    "start",
]
