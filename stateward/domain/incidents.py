"""Incidents (issue 15), the pure half: what kind a failure is, `$retry` and `$resolve`.

A failure that stops an instance puts it in status `error` (a hook that failed or timed
out, a result that leads nowhere, the cycle guard, a timer whose action broke the
instance). The runtime keeps an incident row for it; this module decides its kind from the
event that failed, and evaluates the two operator events that end it, so `verify` replays
them like any other event:

- `$retry {incident?, hook?, module?}`: the instance in `error` becomes `active` again and
  its state's hook runs again (the hook named, else the state's own); `module` records
  the hook module (namespace, name, version, hash) current when the operator retried.
  Data and state are unchanged; the incident stays open until the re-run is recorded.
- `$resolve {incident?, action, input?}`: the operator decides instead. `action` `$cancel`
  cancels the instance; any other name performs that business action of the current
  state with `input` (the form still applies; the audience does not: the operator role,
  checked by the runtime, is the authority).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from stateward.domain import events as ev
from stateward.domain.errors import INACTIVE_PROCESS, INVALID_INPUT, DomainError
from stateward.domain.hookrouting import ENTRY, waiting_hooks
from stateward.domain.lifecycle import cancel
from stateward.domain.model import (
    ACTIVE,
    ERROR,
    Actor,
    Definition,
    DomainEvent,
    Effects,
    Outcome,
    ProcessSnapshot,
)
from stateward.domain.transition import perform

RETRY: Final = "$retry"
RESOLVE: Final = "$resolve"
#: `$resolve`'s action that cancels the instance instead of performing a business action.
CANCEL_ACTION: Final = "$cancel"

# Incident kinds (GraphQL `IncidentKind`).
HOOK_FAILED: Final = "HOOK_FAILED"
HOOK_TIMEOUT: Final = "HOOK_TIMEOUT"
CYCLE_GUARD: Final = "CYCLE_GUARD"
TIMER_FAILED: Final = "TIMER_FAILED"
WEBHOOK_EXHAUSTED: Final = "WEBHOOK_EXHAUSTED"
#: Any other failure that put the instance in `error` (a join, an auto-transition).
WORKFLOW_ERROR: Final = "WORKFLOW_ERROR"
KINDS: Final = (HOOK_FAILED, HOOK_TIMEOUT, CYCLE_GUARD, TIMER_FAILED, WEBHOOK_EXHAUSTED,
                WORKFLOW_ERROR)  # fmt: skip
#: The longest incident message kept (the reason of the failure).
MAX_MESSAGE: Final = 2000
_CYCLE_MARK = "cycle guard"


def error_reason(outcome: Outcome) -> str:
    """The reason of the `workflow.error` event of an outcome ('' when none)."""
    for event in outcome.events:
        if event.type == ev.WORKFLOW_ERROR:
            reason = event.details.get(ev.D_REASON)
            return reason if isinstance(reason, str) else str(event.details)[:MAX_MESSAGE]
    return ""


def kind_of(action: str, input: Mapping[str, Any], reason: str) -> str:
    """The incident kind of a failure: from the event that failed and its reason."""
    if input.get("guard") is True or _CYCLE_MARK in reason:
        return CYCLE_GUARD
    if action == "$automate":
        return HOOK_TIMEOUT if input.get("code") == HOOK_TIMEOUT else HOOK_FAILED
    if action == "$timer":
        return TIMER_FAILED
    return WORKFLOW_ERROR


def retry_hook(definition: Definition, process: ProcessSnapshot, hook: Any) -> str:
    """The hook a `$retry` re-runs: `hook` when the state waits for it, else the state's
    entry hook (INVALID_INPUT /hook when there is nothing to re-run)."""
    waiting = waiting_hooks(definition.states.get(process.state))
    if hook is not None:
        if not isinstance(hook, str) or hook not in waiting:
            raise DomainError(
                INVALID_INPUT,
                f"state {process.state!r} has no hook {hook!r} to re-run",
                pointer="/hook",
            )
        return hook
    for name, phase in waiting.items():
        if phase == ENTRY:
            return name
    if len(waiting) == 1:
        return next(iter(waiting))
    raise DomainError(
        INVALID_INPUT,
        f"state {process.state!r} has no hook to re-run; resolve the incident with an action",
        pointer="/hook",
    )


def retry(definition: Definition, process: ProcessSnapshot, payload: Mapping[str, Any]) -> Outcome:
    """`$retry`: `error` -> `active` and the hook runs again (see the module docstring)."""
    _require_error(process)
    hook = retry_hook(definition, process, payload.get("hook"))
    details: dict[str, Any] = {ev.D_HOOK: hook}
    for key in ("incident", "module"):
        if payload.get(key) is not None:
            details[key] = payload[key]
    retried = DomainEvent(ev.WORKFLOW_RETRIED, process.state, process.state, None, details)
    return Outcome(
        RETRY, process.state, process.state, ACTIVE, process.data, Effects(run_hook=hook),
        (retried,),
    )  # fmt: skip


def resolve(
    definition: Definition,
    process: ProcessSnapshot,
    payload: Mapping[str, Any],
    actor: Actor,
    ts: str,
    event_id: str,
) -> Outcome:
    """`$resolve`: cancel, or perform the operator's action on the instance in `error`."""
    _require_error(process)
    action = payload.get("action")
    if not isinstance(action, str) or not action:
        raise DomainError(INVALID_INPUT, "action must be an action name or $cancel",
                          pointer="/action")  # fmt: skip
    if action == CANCEL_ACTION:
        reason = payload.get("reason")
        return cancel(definition, process, actor, ts,
                      reason if isinstance(reason, str) else None, authorize=False)  # fmt: skip
    if action.startswith("$"):
        raise DomainError(INVALID_INPUT, "action must be an action name or $cancel",
                          pointer="/action")  # fmt: skip
    action_input = payload.get("input") or {}
    if not isinstance(action_input, Mapping):
        raise DomainError(INVALID_INPUT, "input must be an object", pointer="/input")
    live = replace(process, status=ACTIVE, automation_chain=0)
    return perform(definition, live, action, action_input, actor, ts, event_id, authorize=False)


def _require_error(process: ProcessSnapshot) -> None:
    if process.status != ERROR:
        raise DomainError(
            INACTIVE_PROCESS, f"process {process.id} is {process.status}, not in error"
        )
