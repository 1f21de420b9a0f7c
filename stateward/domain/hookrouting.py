"""Routing after a hook (seed §8 steps 5-6): `on_advance` and a dynamic state's hook.

An `advance` out of a state with `stage_config.on_advance`, or out of a `dynamic` state
whose branch rules all fail, hands over to a hook (`transition.hook_pending`): the event
records the submission, the runtime runs the hook after the commit and records its result
in a `$automate` event, and `lifecycle.automate` routes on from here — so `verify`
replays the recorded result and never runs Starlark.

- after `on_advance` (result merged): the state's branch rules, then (dynamic) its
  routing hook, then ordinal + 1 or completion past the last state;
- after a routing hook (result merged, `$action`/`$next`/`state` left out): `$action`
  performs that action, `$next` moves to a state key or 0-based ordinal, neither takes
  ordinal + 1 (completion past the last state).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stateward.domain.branching import ENTRY, ON_ADVANCE, ROUTE, resolve_target
from stateward.domain.effects import completed_in_place
from stateward.domain.errors import INVALID_INPUT, NO_APPLICABLE_ACTION, DomainError
from stateward.domain.model import (
    AUTOMATED,
    DYNAMIC,
    ActionDef,
    Definition,
    Outcome,
    ProcessSnapshot,
    Route,
    StateDef,
)
from stateward.domain.plan import plan_for
from stateward.domain.transition import SYSTEM, execute_generated, perform

NEXT = "$next"


def waiting_hooks(state: StateDef | None) -> dict[str, str]:
    """hook -> phase of every hook an instance in `state` may be waiting for."""
    if state is None or state.terminal:
        return {}
    out: dict[str, str] = {}
    if state.hook is not None and state.stage_type == AUTOMATED:
        out[state.hook] = ENTRY
    if state.hook is not None and state.stage_type == DYNAMIC:
        out[state.hook] = ROUTE
    if state.on_advance is not None:
        out[state.on_advance] = ON_ADVANCE
    return out


def route_after(
    definition: Definition,
    process: ProcessSnapshot,
    phase: str,
    result: Mapping[str, Any],
    ts: str,
    event_id: str,
) -> Outcome:
    """Route on from `process` (its data already holds the merged result) after the
    hook of `phase`; a DomainError when the result leads nowhere."""
    plan = plan_for(definition)
    state = definition.states[process.state]
    system = SYSTEM.as_value()
    if phase == ON_ADVANCE:
        for act in plan.candidates.get(state.key, ()):
            if not act.generated or act.hook_phase == ON_ADVANCE:
                continue
            if act.when_fn is None or act.when_fn(process.data, {}, system):
                return execute_generated(plan, process, state, act, ts, event_id)
        raise DomainError(NO_APPLICABLE_ACTION, f"no route out of {state.key!r} after on_advance")
    action = result.get("$action")
    if isinstance(action, str):
        return perform(
            definition, process, action, {}, SYSTEM, ts, event_id, authorize=False,
            check_form=False,
        )  # fmt: skip
    if NEXT in result:
        target = resolve_target(result[NEXT], list(definition.states))
        if target is None:
            raise DomainError(
                INVALID_INPUT, f"the hook's $next {result[NEXT]!r} names no state (key or ordinal)"
            )
        return _move(plan, process, state, target, ts, event_id)
    keys = list(definition.states)
    if state.ordinal + 1 < len(keys):
        return _move(plan, process, state, keys[state.ordinal + 1], ts, event_id)
    return completed_in_place(state, f"{state.key}#hook", process.data, ())


def _move(
    plan: Any, process: ProcessSnapshot, state: StateDef, target: str, ts: str, event_id: str
) -> Outcome:
    """Move to `target` through the state's generated `#hook` action (one route)."""
    act = ActionDef(
        key=f"{state.key}#hook",
        label="branch: routing hook",
        from_states=(state.key,),
        routes=(Route(to=target),),
        generated=True,
    )
    return execute_generated(plan, process, state, act, ts, event_id)
