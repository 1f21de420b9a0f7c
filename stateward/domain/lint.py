"""Authoring warnings of a definition (DESIGN §2.2): they never block anything.

UNREACHABLE_STATE (no path of actions from `initial`), DEAD_END_STATE (not terminal and no
action leaves it), TERMINAL_HAS_ACTIONS (an action or branch rule starts from a terminal
state), SHADOWED_ACTION (a guarded action that `advance` never reaches because an earlier unguarded
one is open to the same actors in the same states),
MISSING_LABEL (a state without a label). Generated branch actions count for the graph but
are never reported as shadowing or shadowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from stateward.domain import errors
from stateward.domain.errors import Problem
from stateward.domain.model import ActionDef, StateDef
from stateward.domain.mutations import pointer_join


def _sources(action: ActionDef, states: Mapping[str, StateDef]) -> set[str]:
    if action.from_states is not None:
        return {s for s in action.from_states if s in states}
    return {key for key, state in states.items() if not state.terminal}


def _warn(code: str, message: str, pointer: str) -> Problem:
    return Problem(code, message, pointer, severity="warning")


def lint(
    initial: str | None,
    states: Mapping[str, StateDef],
    declared: Mapping[str, ActionDef],
    generated: Iterable[ActionDef],
) -> list[Problem]:
    """Every warning of a (possibly partly invalid) definition, in a stable order."""
    every = [*generated, *declared.values()]
    found: list[Problem] = []
    found.extend(_reachability(initial, states, every))
    found.extend(_dead_ends(states, every))
    found.extend(_terminal_actions(states, declared))
    found.extend(_shadowed(declared))
    found.extend(
        _warn(errors.MISSING_LABEL, f"state {key!r} has no label", pointer_join("/states", key))
        for key, state in states.items()
        if state.label is None
    )
    return found


def _reachability(
    initial: str | None, states: Mapping[str, StateDef], actions: list[ActionDef]
) -> list[Problem]:
    if initial not in states:
        return []
    edges = [(_sources(a, states), a.to) for a in actions if a.to in states]
    seen = {initial}
    frontier = [initial]
    while frontier:
        current = frontier.pop()
        for sources, to in edges:
            if current in sources and to is not None and to not in seen:
                seen.add(to)
                frontier.append(to)
    return [
        _warn(
            errors.UNREACHABLE_STATE,
            f"state {key!r} cannot be reached from the initial state {initial!r}",
            pointer_join("/states", key),
        )
        for key in states
        if key not in seen
    ]


def _dead_ends(states: Mapping[str, StateDef], actions: list[ActionDef]) -> list[Problem]:
    exits: set[str] = set()
    for action in actions:
        if action.to is not None:
            exits.update(s for s in _sources(action, states) if s != action.to)
    return [
        _warn(
            errors.DEAD_END_STATE,
            f"state {key!r} is not terminal but no action leaves it",
            pointer_join("/states", key),
        )
        for key, state in states.items()
        if not state.terminal and key not in exits
    ]


def _terminal_actions(
    states: Mapping[str, StateDef], declared: Mapping[str, ActionDef]
) -> list[Problem]:
    found = [
        _warn(
            errors.TERMINAL_HAS_ACTIONS,
            f"action {key!r} starts from terminal state(s) "
            f"{', '.join(sorted(terminal))}; terminal states accept no action",
            pointer_join("/actions", key, "from"),
        )
        for key, action in declared.items()
        if (terminal := {s for s in action.from_states or () if s in states and states[s].terminal})
    ]
    found.extend(
        _warn(
            errors.TERMINAL_HAS_ACTIONS,
            f"terminal state {key!r} has branch rules; they never run",
            pointer_join("/states", key, "branch_rules"),
        )
        for key, state in states.items()
        if state.terminal and state.branch_rules
    )
    return found


def _covers(first: ActionDef, later: ActionDef) -> bool:
    """True when every actor allowed to perform `later` may also perform `first`."""
    if not first.roles:
        return True
    return bool(later.roles) and set(later.roles) <= set(first.roles)


def _advance_sources(action: ActionDef) -> set[str]:
    """States from which `advance` may pick the action: explicit `from`, and a `to`."""
    return set(action.from_states or ()) if action.to is not None else set()


def _shadowed(declared: Mapping[str, ActionDef]) -> list[Problem]:
    """Guarded actions that `advance` can never reach: an earlier unguarded action is open
    to all of their actors in all of their states. Only transitions with an explicit `from`
    are advance candidates; unguarded actions are chosen by name (approve / reject), so they
    are never reported."""
    found: list[Problem] = []
    earlier: list[ActionDef] = []
    for key, action in declared.items():
        mine = _advance_sources(action)
        guarded = action.when is not None or action.when_fn is not None
        for first in earlier if guarded and mine else ():
            if _covers(first, action) and mine <= _advance_sources(first):
                message = (
                    f"action {key!r} is shadowed by the earlier unguarded action "
                    f"{first.key!r}: advance always takes that one first, so this guard is "
                    "never tried"
                )
                found.append(_warn(errors.SHADOWED_ACTION, message, pointer_join("/actions", key)))
                break
        if not guarded:
            earlier.append(action)
    return found
