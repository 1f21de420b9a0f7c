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

Two failures are not a hook's (issue 15, the gaps closed after the first landing):

- A timer whose action FAILED (not one the instance simply moved past, see
  `TIMER_OVERTAKEN`) is recorded by a `$timer {schedule, action, key?, failed}` event:
  the instance goes to `error` (`timer_failed`), a TIMER_FAILED incident opens. Its
  `$retry {incident?, timer: {schedule, action, key?}}` performs the timer's action again
  IN that event (it is pure, no hook to wait for): success moves the instance on, a new
  failure keeps it in `error` with one more attempt (the event is written either way).
- A webhook delivery that exhausted its retries is recorded by a row-only
  `$webhook {delivery, outcome: exhausted|delivered, event?, attempts?, error?}` event
  (`webhook`): the instance's data, state and status never change (a notification that
  could not be posted does not stop the instance). `$retry {incident?, delivery}` re-queues
  the delivery and `$resolve {incident?, delivery, action: "$cancel"}` gives it up; both
  are row-only too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from stateward.domain import events as ev
from stateward.domain.errors import (
    CONFLICT,
    GUARD_FAILED,
    INACTIVE_PROCESS,
    INVALID_INPUT,
    NOT_FOUND,
    TERMINAL_STATE,
    WRONG_STATE,
    DomainError,
)
from stateward.domain.hookrouting import ENTRY, waiting_hooks
from stateward.domain.lifecycle import cancel
from stateward.domain.model import (
    ACTIVE,
    ERROR,
    STALE,
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
TIMER: Final = "$timer"
#: A webhook delivery's end recorded on its instance (row-only: `webhook`).
WEBHOOK: Final = "$webhook"
WEBHOOK_OUTCOMES: Final = ("exhausted", "delivered")
#: Refusals of a due timer's action that mean the instance moved on (or the author's
#: `when` says "not any more"): the timer is closed `not_applicable`, no incident. Any
#: other refusal (a form, a `then`, a mutation, a role...) is a failure: TIMER_FAILED.
TIMER_OVERTAKEN: Final = frozenset(
    {WRONG_STATE, TERMINAL_STATE, INACTIVE_PROCESS, NOT_FOUND, GUARD_FAILED, CONFLICT}
)
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
    if action == TIMER or (action == RETRY and "timer" in input):
        return TIMER_FAILED
    if action == WEBHOOK:
        return WEBHOOK_EXHAUSTED
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


def retry(
    definition: Definition,
    process: ProcessSnapshot,
    payload: Mapping[str, Any],
    actor: Actor | None = None,
    ts: str = "",
    event_id: str = "",
) -> Outcome:
    """`$retry`: `error` -> `active` and the hook runs again; or the failed timer's action
    performed again (`timer`); or a webhook delivery re-queued (`delivery`, row-only).
    See the module docstring."""
    if "delivery" in payload:
        return _row_retry(process, payload)
    _require_error(process)
    if "timer" in payload:
        return _retry_timer(definition, process, payload, actor, ts, event_id)
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


def timer_spec(payload: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The timer of a `$retry` (`timer: {schedule, action, key?, input?}`): its action
    and input (INVALID_INPUT /timer otherwise)."""
    timer = payload.get("timer")
    if not isinstance(timer, Mapping) or not isinstance(timer.get("action"), str):
        raise DomainError(INVALID_INPUT, "timer must name the timer's action",
                          pointer="/timer/action")  # fmt: skip
    action_input = timer.get("input") or {}
    if not isinstance(action_input, Mapping):
        raise DomainError(INVALID_INPUT, "timer input must be an object", pointer="/timer/input")
    return timer["action"], action_input


def _retry_timer(
    definition: Definition,
    process: ProcessSnapshot,
    payload: Mapping[str, Any],
    actor: Actor | None,
    ts: str,
    event_id: str,
) -> Outcome:
    """The failed timer's action, performed again now (with the operator's authority); a
    new refusal is recorded as one more failure (status stays `error`)."""
    action, action_input = timer_spec(payload)
    live = replace(process, status=ACTIVE, automation_chain=0)
    who = actor or Actor(id="system")
    try:
        return perform(definition, live, action, action_input, who, ts, event_id,
                       authorize=False)  # fmt: skip
    except DomainError as error:
        reason = timer_reason(action, f"{error.code}: {error.message}")
        return fail(process, reason, RETRY, action)


def timer_reason(action: str, failed: str) -> str:
    """The incident message of a failed timer."""
    return f"timer {action!r} failed: {failed}"[:MAX_MESSAGE]


def timer_failed(process: ProcessSnapshot, payload: Mapping[str, Any]) -> Outcome:
    """`$timer {..., failed}`: the due timer's action failed (the runtime tried it and
    recorded why); the live instance goes to `error`, data unchanged."""
    if process.status not in (ACTIVE, STALE):
        raise DomainError(INACTIVE_PROCESS, f"process {process.id} is {process.status}")
    action, failed = payload.get("action"), payload.get("failed")
    if not isinstance(failed, str) or not failed:
        raise DomainError(INVALID_INPUT, "failed must be the reason", pointer="/failed")
    return fail(process, timer_reason(str(action), failed), TIMER, str(action))


def fail(process: ProcessSnapshot, reason: str, name: str, action: str) -> Outcome:
    """Status `error` + `workflow.error` naming the timer's action; data unchanged."""
    details: dict[str, Any] = {ev.D_REASON: reason, "action": action}
    error = DomainEvent(ev.WORKFLOW_ERROR, process.state, process.state, None, details)
    return Outcome(name, process.state, process.state, ERROR, process.data, Effects(), (error,))


def _delivery(payload: Mapping[str, Any]) -> int:
    delivery = payload.get("delivery")
    if isinstance(delivery, bool) or not isinstance(delivery, int) or delivery < 1:
        raise DomainError(INVALID_INPUT, "delivery must be a delivery id", pointer="/delivery")
    return delivery


def _row_retry(process: ProcessSnapshot, payload: Mapping[str, Any]) -> Outcome:
    """`$retry {delivery}`: the runtime re-queues the delivery; the instance is unchanged."""
    details: dict[str, Any] = {"delivery": _delivery(payload)}
    if payload.get("incident") is not None:
        details["incident"] = payload["incident"]
    retried = DomainEvent(ev.WORKFLOW_RETRIED, process.state, process.state, None, details)
    return _unchanged(process, RETRY, (retried,))


def webhook(process: ProcessSnapshot, payload: Mapping[str, Any]) -> Outcome:
    """`$webhook {delivery, outcome, ...}`: a delivery's end, row-only (see the module
    docstring); the incident rows are the runtime's."""
    _delivery(payload)
    if payload.get("outcome") not in WEBHOOK_OUTCOMES:
        raise DomainError(INVALID_INPUT, "outcome must be exhausted or delivered",
                          pointer="/outcome")  # fmt: skip
    return _unchanged(process, WEBHOOK, ())


def _unchanged(process: ProcessSnapshot, name: str, events: tuple[DomainEvent, ...]) -> Outcome:
    return Outcome(name, process.state, process.state, process.status, process.data,
                   Effects(), events)  # fmt: skip


def resolve(
    definition: Definition,
    process: ProcessSnapshot,
    payload: Mapping[str, Any],
    actor: Actor,
    ts: str,
    event_id: str,
) -> Outcome:
    """`$resolve`: cancel, or perform the operator's action on the instance in `error`;
    with `delivery`, give the webhook delivery up (`$cancel` only, row-only)."""
    action = payload.get("action")
    if "delivery" in payload:
        _delivery(payload)
        if action != CANCEL_ACTION:
            raise DomainError(INVALID_INPUT, "a webhook incident is retried or resolved with "
                              "$cancel (the delivery is given up)", pointer="/action")  # fmt: skip
        return _unchanged(process, RESOLVE, ())
    _require_error(process)
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
