"""Which actions an actor could perform on a process right now (pure, for UIs).

`available_actions` runs the same rules `engine.perform` applies before it touches data
(DESIGN §5 steps 1-3 and 5): live status, a non-terminal current state listed in the
action's `from`, the state's audience and claim, the action's roles and its `when` guard.
A guard that reads `input.*` cannot be judged without the input the actor will send; such
actions are listed with `guard_needs_input=True` instead of being dropped. Form checks
(step 4) also need the input and are left to the actual call. Generated branch actions
(`<state>#<n>`) are reached through `advance` only and are not listed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stateward.domain.access import check_state_access, holds_role
from stateward.domain.errors import DomainError
from stateward.domain.expressions import expression_paths
from stateward.domain.model import LIVE_STATUSES, ActionDef, Actor, Definition, ProcessSnapshot


@dataclass(frozen=True)
class AvailableAction:
    """An action the actor may perform now; `guard_needs_input` when `when` reads input."""

    action: ActionDef
    guard_needs_input: bool = False


def reads_input(expression: str | None) -> bool:
    """True when the expression reads `input.*` (it cannot be decided ahead of the call)."""
    if not expression:
        return False
    try:
        paths = expression_paths(expression)
    except DomainError:
        return True
    return any(p == "input" or p.startswith("input.") for p in paths)


def available_actions(
    definition: Definition, process: ProcessSnapshot, actor: Actor
) -> list[AvailableAction]:
    """The declared actions `actor` could perform on `process` now, in definition order."""
    if process.status not in LIVE_STATUSES:
        return []
    state = definition.states.get(process.state)
    if state is None or state.terminal:
        return []
    try:
        check_state_access(state, actor, process.claimed_by)
    except DomainError:
        return []
    actor_value: Mapping[str, Any] = actor.as_value()
    found: list[AvailableAction] = []
    for action in definition.actions.values():
        if action.generated or not _leaves(action, state.key):
            continue
        if not holds_role(action, actor):
            continue
        needs_input = reads_input(action.when)
        guard = action.when_fn
        if guard is not None and not needs_input and not guard(process.data, {}, actor_value):
            continue
        found.append(AvailableAction(action, needs_input))
    return found


def _leaves(action: ActionDef, state: str) -> bool:
    return action.from_states is None or state in action.from_states
