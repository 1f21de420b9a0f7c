"""JSON value semantics shared by expressions, mutations and forms.

JSON types as the DSL sees them (booleans are not numbers), deep equality across them,
and the comparison rules of DESIGN §3: NULL compares false, no coercion across types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["compare_values", "json_equal", "json_kind"]


def json_kind(value: Any) -> str:
    """The JSON type of a value: null, boolean, number, string, array, object (or other).

    Booleans are not numbers here, unlike in Python.
    """
    t = type(value)
    if value is None:
        return "null"
    if t is bool:
        return "boolean"
    if t is int or t is float:
        return "number"
    if t is str:
        return "string"
    if isinstance(value, bool):  # pragma: no cover - bool cannot be subclassed
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "other"


def json_equal(x: Any, y: Any) -> bool:
    """Deep JSON equality: types must match (1 == 1.0, but true != 1); iterative, no recursion."""
    stack = [(x, y)]
    while stack:
        a, b = stack.pop()
        ka, kb = json_kind(a), json_kind(b)
        if ka != kb:
            return False
        if ka == "array":
            if len(a) != len(b):
                return False
            stack.extend(zip(a, b, strict=True))
        elif ka == "object":
            if len(a) != len(b) or any(k not in b for k in a):
                return False
            stack.extend((a[k], b[k]) for k in a)
        elif ka != "null" and a != b:
            return False
    return True


def compare_values(x: Any, op: str, y: Any) -> bool:
    """Compare two JSON values per DESIGN §3 (NULL false, strict types, no coercion)."""
    if x is None or y is None:
        return False
    if op == "=":
        return json_equal(x, y)
    if op == "!=":
        return not json_equal(x, y)
    kx, ky = json_kind(x), json_kind(y)
    if kx != ky or kx not in ("number", "string"):
        return False
    if op == "<":
        return bool(x < y)
    if op == "<=":
        return bool(x <= y)
    if op == ">":
        return bool(x > y)
    return bool(x >= y)
