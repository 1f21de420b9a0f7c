"""Per-definition lookups the engine needs on every event, computed once.

A `Definition` is immutable, so what `advance` scans (the candidate actions out of each
state, in definition order) is derived once and cached by object identity. The cache holds
a strong reference to each definition it keys, so an id is never reused while cached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stateward.domain.compiled import Mutator, compile_mutation
from stateward.domain.model import CANCEL_TARGET, ActionDef, Definition
from stateward.domain.references import REF

BOOTSTRAP_NAME = "bootstrap"
_CACHE_LIMIT = 4096
_CACHE: dict[int, Plan] = {}


@dataclass(frozen=True, slots=True)
class Plan:
    """What the engine precomputes for one definition."""

    definition: Definition
    #: state key -> actions that list it in `from` and have a `to`, in definition order.
    candidates: dict[str, tuple[ActionDef, ...]]
    #: True for the registry governance workflow (`<namespace>/bootstrap`).
    bootstrap: bool
    #: action key -> its compiled mutation.
    mutators: dict[str, Mutator]
    #: keys of the actions whose values hold `{"$ref"}` objects (they need a `RefScope`).
    scoped: frozenset[str] = frozenset()
    #: True when a state has a `timeout` or the workflow an `idle_timeout`.
    timed: bool = False
    #: True when a state awaits children: the engine keeps `$children`/`$await` and the
    #: runtime tells the instance about its children's ends (`$child`). A workflow without
    #: `await` keeps the v2 behaviour exactly (no engine keys in its data).
    joins: bool = False
    #: True when a value reads `{"$ref": "parent.*"}`: a spawn hands this workflow's
    #: children a copy of the parent's data (their `$parent`).
    reads_parent: bool = False
    #: True when a state has `auto_transition` (the engine follows it on entry).
    auto: bool = False
    #: (action key, from state) -> (effects, events) of a transition whose effects never
    #: depend on the event (no spawn/timers/SLA/hook); filled lazily by the engine.
    templates: dict[tuple[str, str], Any] = field(default_factory=dict)


def is_bootstrap(definition: Definition) -> bool:
    """True for the hard-coded registry workflow: no `$path`, or a `*/bootstrap` one.

    User definitions can never have such a path (validation rejects it: RESERVED_PATH).
    """
    return definition.path is None or definition.path.rsplit("/", 1)[-1] == BOOTSTRAP_NAME


def build_plan(definition: Definition) -> Plan:
    """Compute the `Plan` of a definition (no caching)."""
    candidates: dict[str, list[ActionDef]] = {key: [] for key in definition.states}
    for action in definition.actions.values():
        # `$cancel` is never an advance target: ending an instance is chosen by name
        if not action.moves or action.from_states is None or action.to == CANCEL_TARGET:
            continue
        for state in action.from_states:
            if state in candidates and action not in candidates[state]:
                candidates[state].append(action)
    return Plan(
        definition=definition,
        candidates={key: tuple(acts) for key, acts in candidates.items()},
        bootstrap=is_bootstrap(definition),
        mutators={key: compile_mutation(a.mutate) for key, a in definition.actions.items()},
        scoped=frozenset(key for key, a in definition.actions.items() if _holds_ref(a)),
        joins=any(s.await_ is not None for s in definition.states.values()),
        reads_parent=any(_holds_ref(a, "parent") for a in definition.actions.values()),
        auto=any(s.auto_transition for s in definition.states.values()),
        timed=definition.idle_timeout is not None
        or any(s.timeout is not None for s in definition.states.values()),
    )


def _holds_ref(action: ActionDef, root: str | None = None) -> bool:
    """True when a value of the action (mutation, spawn data or `each`, timer) is a
    `{"$ref"}` (reading `root`, when given)."""
    stack: list[object] = [action.mutate, *(s.data for s in action.spawn)]
    stack.extend(s.each for s in action.spawn)
    stack.extend(s.at for s in action.schedule)
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get(REF)
            if ref is not None and (root is None or str(ref).split(".")[0] == root):
                return True
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def plan_for(definition: Definition) -> Plan:
    """The cached `Plan` of `definition` (built on first use)."""
    plan = _CACHE.get(id(definition))
    if plan is not None and plan.definition is definition:
        return plan
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    plan = build_plan(definition)
    _CACHE[id(definition)] = plan
    return plan
