"""Mutations compiled once per action: the engine's fast path over `apply_mutation`.

`mutations.apply_mutation` is the reference: it re-reads the `mutate` object on every
call. `compile_mutation` does that reading once and returns a closure for the common
shapes (`$set`, `$increment`, `$remove`, with literal or referenced values). Anything
else — `$merge`, `$append`, a value of the wrong type at run time — is handed to the
reference implementation on the untouched data, so results and errors are identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from stateward.domain.mutations import TIMESTAMP, apply_mutation, input_reference, resolve_value
from stateward.domain.references import RefScope

#: `(data, input, ts, scope) -> new data`; `scope` gives `{"$ref"}` values the actor and the
#: parent snapshot (None: they read null); `data.*` references read `data`.
Mutator = Callable[[Mapping[str, Any], Mapping[str, Any], str, RefScope | None], dict[str, Any]]
_FAST_OPERATORS = frozenset({"$set", "$increment", "$remove"})
_EFFECTS = frozenset({"$spawn", "$schedule", "$unschedule"})
_SCALARS = (str, int, float, bool, type(None))


def _copy_only(
    data: Mapping[str, Any], input: Mapping[str, Any], ts: str, scope: RefScope | None = None
) -> dict[str, Any]:
    """No data operators: the new data is a shallow copy."""
    return dict(data)


def _is_static(value: Any) -> bool:
    """A literal scalar that needs no resolving (not `input.<path>`, not `$timestamp`)."""
    if not isinstance(value, _SCALARS):
        return False
    return not isinstance(value, str) or (value != TIMESTAMP and input_reference(value) is None)


def _is_number(value: Any) -> bool:
    kind = type(value)
    return kind is int or (kind is float and math.isfinite(value))


def compile_mutation(mutate: Mapping[str, Any]) -> Mutator:
    """A function `(data, input, ts) -> new data` equal to `apply_mutation(data, mutate, …)`."""
    operators = [op for op in mutate if op not in _EFFECTS]
    if not operators:
        return _copy_only
    reference: Mutator = partial(_reference, mutate)
    if any(op not in _FAST_OPERATORS for op in operators):
        return reference
    sets, increments = mutate.get("$set") or {}, mutate.get("$increment") or {}
    removed = mutate.get("$remove")
    if not isinstance(sets, Mapping) or not isinstance(increments, Mapping):
        return reference
    if isinstance(removed, str):
        removed = [removed]
    if removed is not None and not (
        isinstance(removed, list) and all(isinstance(k, str) for k in removed)
    ):
        return reference
    set_steps = tuple((k, v, _is_static(v)) for k, v in sets.items())
    inc_steps = tuple((k, v, _is_static(v)) for k, v in increments.items())
    removals = tuple(removed or ())

    def mutator(
        data: Mapping[str, Any],
        input: Mapping[str, Any],
        ts: str,
        scope: RefScope | None = None,
    ) -> dict[str, Any]:
        result = dict(data)
        refs: RefScope | None = None
        for key, value, static in set_steps:
            if static:
                result[key] = value
                continue
            if refs is None:
                refs = _scope(data, scope)
            result[key] = resolve_value(value, input, ts, refs)
        for key, by, static in inc_steps:
            if not static:
                if refs is None:
                    refs = _scope(data, scope)
                by = resolve_value(by, input, ts, refs)
            current = result.get(key)
            if current is None:
                current = 0
            if not (_is_number(by) and _is_number(current)):
                return apply_mutation(data, mutate, input, ts, scope)
            total = current + by
            if type(total) is float and not math.isfinite(total):
                return apply_mutation(data, mutate, input, ts, scope)
            result[key] = total
        for key in removals:
            result.pop(key, None)
        return result

    return mutator


def _scope(data: Mapping[str, Any], scope: RefScope | None) -> RefScope:
    """The scope of references: data before the mutation, plus the caller's actor/parent."""
    if scope is None:
        return RefScope(data)
    return RefScope(data, scope.actor, scope.parent)


def _reference(
    mutate: Mapping[str, Any],
    data: Mapping[str, Any],
    input: Mapping[str, Any],
    ts: str,
    scope: RefScope | None = None,
) -> dict[str, Any]:
    """`apply_mutation` with the arguments in `Mutator` order."""
    return apply_mutation(data, mutate, input, ts, scope)
