"""Per-definition lookups the engine needs on every event, computed once.

A `Definition` is immutable, so what `advance` scans (the candidate actions out of each
state, in definition order) is derived once and cached by object identity. The cache holds
a strong reference to each definition it keys, so an id is never reused while cached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stateward.domain.compiled import Mutator, compile_mutation
from stateward.domain.model import ActionDef, Definition

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
        if action.to is None or action.from_states is None:
            continue
        for state in action.from_states:
            if state in candidates and action not in candidates[state]:
                candidates[state].append(action)
    return Plan(
        definition=definition,
        candidates={key: tuple(acts) for key, acts in candidates.items()},
        bootstrap=is_bootstrap(definition),
        mutators={key: compile_mutation(a.mutate) for key, a in definition.actions.items()},
    )


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
