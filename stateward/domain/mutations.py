"""Data mutations of an action (DESIGN §4): `$set $merge $append $increment $remove`.

`validate_mutation` checks a `mutate` object when a definition is loaded; `apply_mutation`
applies one to process data at run time and returns a new dict (copy on write: the data,
the input and the definition's own values are never modified or aliased). A string that
is exactly `input.<path>` is a reference into the action input, `$timestamp` is the event's
timestamp; DSL 2.1 adds `{"$ref": "<path>"}` objects reading `data.*`, `input.*`,
`actor.id`, `actor.roles` and `parent.*` (`references.py`). `resolve_value` resolves all of
them, also inside nested objects and arrays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from stateward.domain.errors import INVALID_INPUT, INVALID_MUTATION, DomainError, Problem
from stateward.domain.jsonvalues import json_kind
from stateward.domain.references import RefScope, parse_reference, read_reference, scan_values

__all__ = [
    "DATA_OPERATORS",
    "EFFECT_OPERATORS",
    "TIMESTAMP",
    "apply_mutation",
    "input_reference",
    "pointer_join",
    "resolve_value",
    "split_mutation",
    "validate_mutation",
]

DATA_OPERATORS = ("$set", "$merge", "$append", "$increment", "$remove")
EFFECT_OPERATORS = ("$spawn", "$schedule", "$unschedule")
TIMESTAMP = "$timestamp"
_INPUT_PREFIX = "input."


def pointer_join(base: str, *tokens: str | int) -> str:
    """Append reference tokens to an RFC 6901 JSON pointer (`~` -> `~0`, `/` -> `~1`)."""
    parts = [str(t).replace("~", "~0").replace("/", "~1") for t in tokens]
    return base + "".join("/" + p for p in parts)


def input_reference(value: object) -> tuple[str, ...] | None:
    """The input path of a string that is exactly `input.<path>`, else None.

    Every dot-separated segment must be non-empty (`input.` or `input.a..b` are plain text).
    """
    if not isinstance(value, str) or not value.startswith(_INPUT_PREFIX):
        return None
    segments = tuple(value[len(_INPUT_PREFIX) :].split("."))
    return segments if all(segments) else None


# --- validation ---------------------------------------------------------------------------


def validate_mutation(mutate: object, pointer: str) -> list[Problem]:
    """Check a `mutate` object's shape; problems are INVALID_MUTATION with their pointer.

    `$spawn`/`$schedule`/`$unschedule` are accepted as lists (or one object); their items
    are the definition validator's to check, like the action-level `spawn`/`schedule`.
    """
    if not isinstance(mutate, Mapping):
        return [_problem("`mutate` must be an object", pointer)]
    problems: list[Problem] = []
    for op, value in mutate.items():
        at = pointer_join(pointer, op)
        if op in EFFECT_OPERATORS:
            if not isinstance(value, list | Mapping):
                problems.append(_problem(f"`{op}` must be a list of objects", at))
        elif op == "$remove":
            problems.extend(_check_remove(value, at))
        elif op in DATA_OPERATORS:
            if not isinstance(value, Mapping):
                problems.append(_problem(f"`{op}` must be an object of top-level keys", at))
            else:
                problems.extend(scan_values(value, at, INVALID_MUTATION))
                if op == "$merge":
                    problems.extend(_check_values(value, at, "object", "an object"))
                elif op == "$increment":
                    problems.extend(_check_values(value, at, "number", "a number"))
        else:
            known = ", ".join(DATA_OPERATORS + EFFECT_OPERATORS)
            problems.append(_problem(f"unknown mutation operator {op!r} (known: {known})", at))
    return problems


def _problem(message: str, pointer: str) -> Problem:
    return Problem(INVALID_MUTATION, message, pointer)


def _check_remove(value: object, at: str) -> list[Problem]:
    if isinstance(value, str):
        return []
    if not isinstance(value, list):
        return [_problem("`$remove` must be a key or a list of keys", at)]
    return [
        _problem("`$remove` keys must be strings", pointer_join(at, n))
        for n, key in enumerate(value)
        if not isinstance(key, str)
    ]


def _check_values(values: Mapping[str, Any], at: str, kind: str, noun: str) -> list[Problem]:
    problems = []
    for key, value in values.items():
        if input_reference(value) is not None or parse_reference(value) is not None:
            continue  # checked against the input (or data, actor) at run time
        if json_kind(value) != kind or (kind == "number" and not math.isfinite(value)):
            problems.append(
                _problem(
                    f"value of {key!r} must be {noun} or an input reference", pointer_join(at, key)
                )
            )
    return problems


# --- application --------------------------------------------------------------------------


def split_mutation(
    mutate: Mapping[str, Any],
) -> tuple[dict[str, Any], list[Any], list[Any], list[Any]]:
    """Split `mutate` into (data operators, `$spawn` items, `$schedule` items, `$unschedule` items).

    A single object given for an effect operator becomes a one-item list.
    """
    data_ops = {k: v for k, v in mutate.items() if k not in EFFECT_OPERATORS}

    def items(op: str) -> list[Any]:
        value = mutate.get(op)
        if value is None:
            return []
        return list(value) if isinstance(value, list) else [value]

    return data_ops, items("$spawn"), items("$schedule"), items("$unschedule")


def resolve_value(
    value: Any, input: Mapping[str, Any], ts: str, scope: RefScope | None = None
) -> Any:
    """Resolve `input.<path>` (missing = None), `$timestamp` and `{"$ref": ...}` references
    in a value; `scope` holds what `data.*`, `actor.*` and `parent.*` read (None: null).

    Objects and arrays are resolved item by item and always copied, so the result never
    aliases the definition, the input or the data.
    """
    try:
        return _resolve(value, input, ts, scope)
    except RecursionError:
        raise DomainError(INVALID_INPUT, "value nests too deeply") from None


def _resolve(value: Any, input: Mapping[str, Any], ts: str, scope: RefScope | None) -> Any:
    if isinstance(value, Mapping):
        ref = parse_reference(value)
        if ref is not None:
            return _copy(read_reference(ref[0], ref[1], input, scope))
        return {k: _resolve(v, input, ts, scope) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_resolve(v, input, ts, scope) for v in value]
    if isinstance(value, str):
        if value == TIMESTAMP:
            return ts
        path = input_reference(value)
        if path is None:
            return value
        current: Any = input
        for key in path:
            if not isinstance(current, Mapping):
                return None
            current = current.get(key)
        return _copy(current)
    return value


def _copy(value: Any) -> Any:
    """A deep copy of JSON containers (a resolved value never aliases its source)."""
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value


def apply_mutation(
    data: Mapping[str, Any],
    mutate: Mapping[str, Any],
    input: Mapping[str, Any],
    ts: str,
    scope: RefScope | None = None,
) -> dict[str, Any]:
    """Apply the data operators of `mutate` to `data` and return the new data (a new dict).

    `{"$ref": "data.*"}` reads `data` as it was before the mutation; `scope` adds the
    actor and the parent snapshot (its own `data` is ignored here).

    Order: $set, $merge (shallow), $append, $increment, $remove, whatever the key order.
    Effect operators are ignored here. A type conflict with the current data or a resolved
    input value raises DomainError INVALID_INPUT; an unknown operator INVALID_MUTATION.
    """
    unknown = [op for op in mutate if op not in DATA_OPERATORS and op not in EFFECT_OPERATORS]
    if unknown:
        raise DomainError(INVALID_MUTATION, f"unknown mutation operator {unknown[0]!r}")
    result = dict(data)
    refs = RefScope(data, scope.actor, scope.parent) if scope is not None else RefScope(data)
    for key, value in _entries(mutate, "$set"):
        result[key] = resolve_value(value, input, ts, refs)
    for key, value in _entries(mutate, "$merge"):
        _merge(result, key, resolve_value(value, input, ts, refs))
    for key, value in _entries(mutate, "$append"):
        _append(result, key, resolve_value(value, input, ts, refs))
    for key, value in _entries(mutate, "$increment"):
        _increment(result, key, resolve_value(value, input, ts, refs))
    removed = mutate.get("$remove")
    for key in [removed] if isinstance(removed, str) else list(removed or ()):
        result.pop(key, None)
    return result


def _entries(mutate: Mapping[str, Any], op: str) -> list[tuple[str, Any]]:
    values = mutate.get(op)
    if values is None:
        return []
    if not isinstance(values, Mapping):
        raise DomainError(INVALID_MUTATION, f"`{op}` must be an object")
    return list(values.items())


def _merge(result: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        return
    current = result.get(key)
    if not isinstance(value, Mapping) or not (current is None or isinstance(current, Mapping)):
        raise DomainError(
            INVALID_INPUT,
            f"cannot $merge {json_kind(value)} into {json_kind(current)} at {key!r}",
            pointer=pointer_join("/data", key),
        )
    result[key] = {**(current or {}), **value}


def _append(result: dict[str, Any], key: str, value: Any) -> None:
    current = result.get(key)
    if current is None:
        result[key] = [value]
    elif isinstance(current, list | tuple):
        result[key] = [*current, value]
    else:
        raise DomainError(
            INVALID_INPUT,
            f"cannot $append to {key!r}: it holds a {json_kind(current)}, not an array",
            pointer=pointer_join("/data", key),
        )


def _increment(result: dict[str, Any], key: str, by: Any) -> None:
    current = result.get(key)
    if json_kind(by) != "number":
        raise DomainError(
            INVALID_INPUT,
            f"cannot $increment {key!r} by a {json_kind(by)}",
            pointer=pointer_join("/data", key),
        )
    if current is None:
        current = 0
    elif json_kind(current) != "number":
        raise DomainError(
            INVALID_INPUT,
            f"cannot $increment {key!r}: it holds a {json_kind(current)}, not a number",
            pointer=pointer_join("/data", key),
        )
    total = current + by
    if isinstance(total, float) and not math.isfinite(total):
        raise DomainError(
            INVALID_INPUT, f"$increment of {key!r} overflows", pointer=pointer_join("/data", key)
        )
    result[key] = total
