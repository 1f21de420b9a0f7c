"""Authoring warnings of a definition (DESIGN §2.2): they never block anything.

UNREACHABLE_STATE (no path of actions from `initial`), DEAD_END_STATE (not terminal and no
action leaves it), TERMINAL_HAS_ACTIONS (an action or branch rule starts from a terminal
state), SHADOWED_ACTION (a guarded action that `advance` never reaches because an earlier unguarded
one is open to the same actors in the same states),
MISSING_LABEL (a state without a label). Generated branch actions count for the graph but
are never reported as shadowing or shadowed.

DSL 2.1: a list of routes is one edge per route; `$cancel` is a way out; a state with
`await` is left by its `then` action; a state that a spawn of this workflow enters (`to`)
(or, given `spawned_into`, another workflow's spawn enters) and, in a `spawn_only`
workflow, every state counts as an entry (the parent's spawn may
name any); actions chosen by name (timers, timeouts, `await`) are never SHADOWED_ACTION.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import Problem
from stateward.domain.model import CANCEL_TARGET, ActionDef, StateDef, TimeoutSpec
from stateward.domain.mutations import pointer_join
from stateward.domain.paths import split_path


@dataclass(frozen=True)
class LintContext:
    """Workflow-level facts the graph checks need (DSL 2.1)."""

    path: str | None = None
    spawn_only: bool = False
    idle_timeout: TimeoutSpec | None = None
    #: States other workflows' spawns start this one in (`spawn_entries`).
    spawned_into: frozenset[str] = frozenset()


def spawn_entries(sources: Iterable[Any], path: str) -> frozenset[str]:
    """The states of workflow `path` that the spawns of other definitions (raw JSON
    objects) start a child in: their spawn items' `to`, action-level or `$spawn` in
    `mutate`. Only spawners of `path`'s namespace or above count: a spawn into another
    namespace starts the child at its initial state (the `to` is not honoured there)."""
    target = split_path(path)[0]
    found: set[str] = set()
    for source in sources:
        if not isinstance(source, Mapping):
            continue
        own = source.get("$path")
        actions = source.get("actions")
        if not isinstance(own, str) or own == path or not isinstance(actions, Mapping):
            continue
        namespace = split_path(own)[0]
        if not (target == namespace or target.startswith(namespace + "/")):
            continue  # another namespace's spawn starts it at its initial state
        for action in actions.values():
            if not isinstance(action, Mapping):
                continue
            mutate = action.get("mutate")
            items = [
                action.get("spawn"),
                mutate.get("$spawn") if isinstance(mutate, Mapping) else None,
            ]
            for group in items:
                for item in group if isinstance(group, list) else [group]:
                    if (
                        isinstance(item, Mapping)
                        and item.get("workflow") == path
                        and isinstance(item.get("to"), str)
                    ):
                        found.add(item["to"])
    return frozenset(found)


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
    ctx: LintContext | None = None,
) -> list[Problem]:
    """Every warning of a (possibly partly invalid) definition, in a stable order."""
    ctx = ctx or LintContext()
    every = [*generated, *declared.values()]
    found: list[Problem] = []
    found.extend(_reachability(initial, states, every, _entries(states, every, ctx)))
    found.extend(_dead_ends(states, every))
    found.extend(_terminal_actions(states, declared))
    found.extend(_shadowed(declared, _by_name(states, every, ctx)))
    found.extend(
        _warn(errors.MISSING_LABEL, f"state {key!r} has no label", pointer_join("/states", key))
        for key, state in states.items()
        if state.label is None
    )
    return found


def _entries(
    states: Mapping[str, StateDef], actions: list[ActionDef], ctx: LintContext
) -> set[str]:
    """States a process may start in besides `initial`: a spawn of this very workflow
    or of another one (`ctx.spawned_into`) names them, or (spawn_only) a parent's spawn
    may name any of them."""
    if ctx.spawn_only:
        return set(states)
    own = {
        spec.to
        for action in actions
        for spec in action.spawn
        if spec.workflow == ctx.path and spec.to is not None and spec.to in states
    }
    return own | {key for key in ctx.spawned_into if key in states}


def _by_name(
    states: Mapping[str, StateDef], actions: list[ActionDef], ctx: LintContext
) -> set[str]:
    """Actions the engine performs by name (timers, timeouts, joins), never via advance."""
    named = {s.action for a in actions for s in a.schedule}
    for state in states.values():
        if state.timeout is not None:
            named.add(state.timeout.action)
        if state.await_ is not None:
            named.add(state.await_.then)
    if ctx.idle_timeout is not None:
        named.add(ctx.idle_timeout.action)
    return named


def _edges(states: Mapping[str, StateDef], actions: list[ActionDef]) -> list[tuple[set[str], str]]:
    """(source states, target) of every transition, `await` joins included."""
    edges = [(_sources(a, states), to) for a in actions for to in a.targets if to in states]
    by_key = {a.key: a for a in actions}
    for key, state in states.items():
        then = by_key.get(state.await_.then) if state.await_ is not None else None
        if then is not None:
            edges.extend(({key}, to) for to in then.targets if to in states)
    return edges


def _reachability(
    initial: str | None,
    states: Mapping[str, StateDef],
    actions: list[ActionDef],
    entries: set[str],
) -> list[Problem]:
    if initial not in states:
        return []
    edges = _edges(states, actions)
    seen = {initial, *entries}
    frontier = list(seen)
    while frontier:
        current = frontier.pop()
        for sources, to in edges:
            if current in sources and to not in seen:
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
        for to in action.targets:
            exits.update(s for s in _sources(action, states) if s != to)
    exits.update(key for key, state in states.items() if state.await_ is not None)
    # Past the last state, advance completes the instance (a generated completing action);
    # a state routed on purpose (rules or auto_transition) is not reported for that.
    routed = {k for k, s in states.items() if s.branch_rules or s.auto_transition or s.on_advance}
    exits.update(
        s for action in actions if action.completes for s in action.from_states or () if s in routed
    )
    exits.update(s for sources, to in _edges(states, actions) for s in sources if s != to)
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
    if not action.moves or action.to == CANCEL_TARGET:  # `$cancel` is chosen by name only
        return set()
    return set(action.from_states or ())


def _shadowed(declared: Mapping[str, ActionDef], by_name: set[str]) -> list[Problem]:
    """Guarded actions that `advance` can never reach: an earlier unguarded action is open
    to all of their actors in all of their states. Only transitions with an explicit `from`
    are advance candidates; unguarded actions are chosen by name (approve / reject), so they
    are never reported."""
    found: list[Problem] = []
    earlier: list[ActionDef] = []
    for key, action in declared.items():
        mine = _advance_sources(action)
        guarded = action.when is not None or action.when_fn is not None
        for first in earlier if guarded and mine and key not in by_name else ():
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
