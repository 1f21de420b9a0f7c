"""Lifecycle outcomes beyond business actions: cancel, hook automation, errors, staleness.

`automate` is the engine half of an automated (`system`) state: the runtime ran the hook
and recorded its result in a `$automate` event; the engine merges the result into the data
(like `$merge`), then advances. A chain of more than `MAX_AUTOMATION_CHAIN` consecutive
automated events, a hook that failed, or a result that leads nowhere put the process in
status `error` with a `workflow.error` event: returned as an outcome, never raised, so the
runtime records it and replay reproduces it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from stateward.domain import events as ev
from stateward.domain.access import ADMIN_ROLE, has_role
from stateward.domain.branching import ENTRY
from stateward.domain.errors import (
    FORBIDDEN,
    INACTIVE_PROCESS,
    TERMINAL_STATE,
    DomainError,
)
from stateward.domain.hookcalls import WORKFLOW_KEY, writes_for
from stateward.domain.hookrouting import NEXT, route_after, waiting_hooks
from stateward.domain.model import (
    ACTIVE,
    CANCELLED,
    ERROR,
    STALE,
    SYSTEM_ACTOR,
    Actor,
    Definition,
    DomainEvent,
    Effects,
    Outcome,
    ProcessSnapshot,
    SlaEffect,
)
from stateward.domain.transition import advance

MAX_AUTOMATION_CHAIN = 10
AUTOMATE = "$automate"
CANCEL = "$cancel"
STALE_OP = "$stale"
SYSTEM = Actor(id=SYSTEM_ACTOR)
#: Hook result keys never merged into data: the routing key and the authoritative state.
RESERVED_RESULT_KEYS = frozenset({"$action", "$next", "state"})


def cancel(
    definition: Definition,
    process: ProcessSnapshot,
    actor: Actor,
    ts: str,
    reason: str | None = None,
    *,
    authorize: bool = True,
) -> Outcome:
    """`$cancel`: a live (or errored) non-terminal process, by an `admin`, the actor who
    started it, or the system -> status `cancelled`; open assignments are cancelled.
    `authorize=False` (a replay, whose actors' roles are not known) skips the actor rule.
    """
    del ts  # the runtime stamps the row; the outcome itself is time-independent
    if process.status not in (ACTIVE, STALE, ERROR):
        raise DomainError(INACTIVE_PROCESS, f"process {process.id} is {process.status}")
    state = definition.states.get(process.state)
    if state is not None and state.terminal:
        raise DomainError(TERMINAL_STATE, f"state {process.state!r} is terminal")
    allowed = (
        actor.id == SYSTEM_ACTOR
        or has_role(actor, ADMIN_ROLE)
        or (process.started_by is not None and actor.id == process.started_by)
    )
    if authorize and not allowed:
        raise DomainError(FORBIDDEN, "only an admin or the actor who started it may cancel")
    details: dict[str, Any] = {ev.D_REASON: reason} if reason else {}
    domain_events = [
        DomainEvent(ev.WORKFLOW_CANCELLED, process.state, process.state, None, details)
    ]
    team = state.assign if state is not None else None
    assigned = state is not None and state.assigned
    if assigned:
        domain_events.append(
            DomainEvent(ev.ASSIGNMENT_CANCELLED, process.state, process.state, team)
        )
    sla = None
    if state is not None and state.sla_seconds is not None:
        sla = SlaEffect(state=state.key, warn_at=None, due_at=None)
    effects = Effects(cancel_assignments=assigned, sla=sla)
    return Outcome(
        CANCEL, process.state, process.state, CANCELLED, process.data, effects, tuple(domain_events)
    )


def fail(
    definition: Definition,
    process: ProcessSnapshot,
    reason: str,
    *,
    hook: str | None = None,
    action: str = AUTOMATE,
) -> Outcome:
    """Status `error` + `workflow.error` (a failing hook, a runaway chain); data unchanged."""
    del definition
    details: dict[str, Any] = {ev.D_REASON: reason}
    if hook is not None:
        details[ev.D_HOOK] = hook
    error = DomainEvent(ev.WORKFLOW_ERROR, process.state, process.state, None, details)
    return Outcome(action, process.state, process.state, ERROR, process.data, Effects(), (error,))


def automate(
    definition: Definition,
    process: ProcessSnapshot,
    result: Any,
    *,
    ts: str,
    event_id: str,
    input: Mapping[str, Any] | None = None,
    hook: str | None = None,
) -> Outcome:
    """`$automate`: merge a hook's `result` into data (shallow, like `$merge`), then advance
    as the system actor; `result["$action"]` names the action instead of searching. The
    hook's own `workflow.set_stage_data` writes (`input["workflow"]`) merge first.

    `process.automation_chain` counts the consecutive automated events before this one;
    the 11th of a chain, a non-object result or a result from which no action applies
    returns an `error` outcome (data unchanged). A process that is not live raises
    INACTIVE_PROCESS.
    """
    if process.status not in (ACTIVE, STALE):
        raise DomainError(INACTIVE_PROCESS, f"process {process.id} is {process.status}")
    hook = hook or _state_hook(definition, process)
    if process.automation_chain >= MAX_AUTOMATION_CHAIN:
        return fail(
            definition,
            process,
            f"more than {MAX_AUTOMATION_CHAIN} consecutive automated events (cycle guard)",
            hook=hook,
        )
    if not isinstance(result, Mapping):
        return fail(definition, process, "the hook returned a non-object", hook=hook)
    hook_action = result.get("$action")
    if hook_action is not None and not isinstance(hook_action, str):
        return fail(definition, process, "the hook's $action is not a string", hook=hook)
    try:  # the hook's `workflow.set_stage_data` of its own instance, then its result
        merged = {**process.data, **writes_for((input or {}).get(WORKFLOW_KEY), process.id)}
    except DomainError as exc:
        return fail(definition, process, f"{exc.code}: {exc.message}", hook=hook)
    for key, value in result.items():
        if key not in RESERVED_RESULT_KEYS:
            merged[key] = value
    interim = replace(process, data=merged)
    phase = waiting_hooks(definition.states.get(process.state)).get(hook or "", ENTRY)
    if phase != ENTRY or NEXT in result:
        try:
            return route_after(definition, interim, phase, result, ts, event_id)
        except DomainError as exc:
            return fail(definition, process, f"{exc.code}: {exc.message}", hook=hook)
    try:
        return advance(
            definition, interim, input or {}, SYSTEM, ts, event_id, hook_action=hook_action
        )
    except DomainError as exc:
        return fail(definition, process, f"{exc.code}: {exc.message}", hook=hook)


def mark_stale(process: ProcessSnapshot) -> Outcome:
    """`$stale`: an active process with no event for `stale_after` becomes `stale`."""
    if process.status != ACTIVE:
        raise DomainError(INACTIVE_PROCESS, f"process {process.id} is {process.status}")
    stale = DomainEvent(ev.WORKFLOW_STALE, process.state, process.state)
    return Outcome(STALE_OP, process.state, process.state, STALE, process.data, Effects(), (stale,))


def _state_hook(definition: Definition, process: ProcessSnapshot) -> str | None:
    """The hook of the process's current state, if any (for error details)."""
    state = definition.states.get(process.state)
    return state.hook if state is not None else None
