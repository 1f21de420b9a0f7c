"""Compile a parsed expression tree (from `expressions.py`) into Python closures.

Each node becomes a closure `(data, input, actor) -> value|bool`; the hot case
`path <op> literal` gets a specialised closure without generic dispatch. Paths read
mappings only (`Mapping.get`), never attributes: `a.__class__` is just a missing data key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lark import Token, Tree

from stateward.domain.jsonvalues import compare_values, json_kind

if TYPE_CHECKING:  # model imports the task fields, which compile expressions
    from stateward.domain.model import Predicate

__all__ = ["build_predicate"]

Getter = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], Any]


def build_predicate(tree: Tree | Token, paths: set[str]) -> Predicate:
    """The predicate of a parse tree; the paths it reads are added to `paths`."""
    return _predicate(tree, paths)


def _predicate(node: Tree | Token, paths: set[str]) -> Predicate:
    if not isinstance(node, Tree):  # pragma: no cover - the grammar never yields bare tokens
        raise TypeError(f"unexpected token {node!r}")
    kind = node.data
    if kind == "or_expr":
        return _any([_predicate(c, paths) for c in node.children])
    if kind == "and_expr":
        return _all([_predicate(c, paths) for c in node.children])
    if kind == "not_":
        inner = _predicate(node.children[0], paths)
        return lambda d, i, a: not inner(d, i, a)
    if kind == "compare":
        left, op, right = node.children
        return _compare(_operand(left, paths), str(op), _operand(right, paths))
    if kind == "in_":
        return _in(_operand(node.children[0], paths), [_literal(c) for c in node.children[1:]])
    if kind == "in_path":  # DSL 2.1: `x IN <path>`
        path = Tree("path", [node.children[1]])
        return _member(_operand(path, paths), _operand(node.children[0], paths))
    if kind == "contains":  # DSL 2.1: `<array> CONTAINS x`
        return _member(_operand(node.children[0], paths), _operand(node.children[1], paths))
    if kind in ("is_null", "is_not_null"):
        get = _getter(_operand(node.children[0], paths))
        if kind == "is_null":
            return lambda d, i, a: get(d, i, a) is None
        return lambda d, i, a: get(d, i, a) is not None
    if kind == "has_key":
        return _has_key(_operand(node.children[0], paths), _operand(node.children[1], paths))
    # a bare operand used as a condition: true only when its value is boolean true
    operand = _operand(node, paths)
    if operand.predicate is not None:
        return operand.predicate
    get = _getter(operand)
    return lambda d, i, a: get(d, i, a) is True


@dataclass(frozen=True)
class _Operand:
    """An operand: a constant, a data getter, or a parenthesised predicate."""

    const: bool = False
    value: Any = None
    get: Getter | None = None
    predicate: Predicate | None = None


def _operand(node: Tree | Token, paths: set[str]) -> _Operand:
    assert isinstance(node, Tree)
    if node.data == "path":
        text = str(node.children[0])
        paths.add(text)
        return _Operand(get=_path_getter(text))
    if node.data in ("number", "neg_number", "string", "true", "false", "null"):
        return _Operand(const=True, value=_literal(node))
    pred = _predicate(node, paths)
    return _Operand(get=pred, predicate=pred)


def _getter(operand: _Operand) -> Getter:
    if operand.get is not None:
        return operand.get
    value = operand.value
    return lambda d, i, a: value


def _literal(node: Tree | Token) -> Any:
    assert isinstance(node, Tree)
    kind = node.data
    if kind in ("number", "neg_number"):
        raw = str(node.children[0])
        number: int | float = int(raw) if raw.isdigit() else float(raw)
        return -number if kind == "neg_number" else number
    if kind == "string":
        return str(node.children[0])[1:-1].replace("''", "'")
    return {"true": True, "false": False, "null": None}[str(kind)]


def _path_getter(text: str) -> Getter:
    """A getter for a dotted path: `input.*` and `actor.*` pick their root, the rest data."""
    segments = text.split(".")
    root = 0
    if segments[0] == "input":
        root, segments = 1, segments[1:]
    elif segments[0] == "actor":
        root, segments = 2, segments[1:]
    if not segments:
        return (lambda d, i, a: i) if root == 1 else (lambda d, i, a: a)
    if len(segments) == 1:
        key = segments[0]
        if root == 0:
            return lambda d, i, a: d.get(key)
        if root == 1:
            return lambda d, i, a: i.get(key)
        return lambda d, i, a: a.get(key)
    first, rest = segments[0], tuple(segments[1:])

    def get(d: Mapping[str, Any], i: Mapping[str, Any], a: Mapping[str, Any]) -> Any:
        current = (d, i, a)[root].get(first)
        for key in rest:
            if isinstance(current, Mapping):
                current = current.get(key)
            else:
                return None
        return current

    return get


def _any(preds: list[Predicate]) -> Predicate:
    if len(preds) == 2:
        p, q = preds
        return lambda d, i, a: p(d, i, a) or q(d, i, a)

    def pred(d: Mapping[str, Any], i: Mapping[str, Any], a: Mapping[str, Any]) -> bool:
        for p in preds:  # noqa: SIM110 - a plain loop is faster than any(<genexpr>)
            if p(d, i, a):
                return True
        return False

    return pred


def _all(preds: list[Predicate]) -> Predicate:
    if len(preds) == 2:
        p, q = preds
        return lambda d, i, a: p(d, i, a) and q(d, i, a)

    def pred(d: Mapping[str, Any], i: Mapping[str, Any], a: Mapping[str, Any]) -> bool:
        for p in preds:  # noqa: SIM110 - a plain loop is faster than all(<genexpr>)
            if not p(d, i, a):
                return False
        return True

    return pred


def _never(d: Mapping[str, Any], i: Mapping[str, Any], a: Mapping[str, Any]) -> bool:
    return False


def _always(d: Mapping[str, Any], i: Mapping[str, Any], a: Mapping[str, Any]) -> bool:
    return True


_FLIPPED = {"=": "=", "!=": "!=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}


def _compare(left: _Operand, op: str, right: _Operand) -> Predicate:
    if left.const and right.const:
        return _always if compare_values(left.value, op, right.value) else _never
    if left.const:  # `70 > score` is `score < 70`
        left, op, right = right, _FLIPPED[op], left
    get = _getter(left)
    if right.const:
        return _compare_const(get, op, right.value)
    other = _getter(right)
    return lambda d, i, a: compare_values(get(d, i, a), op, other(d, i, a))


def _compare_const(get: Getter, op: str, c: Any) -> Predicate:
    """Specialised closures for the hot case `path <op> literal`."""
    kind = json_kind(c)
    if kind == "null":
        return _never  # any comparison with NULL is false
    if kind == "number":
        nums = (int, float)
        if op == "=":
            return lambda d, i, a: type(v := get(d, i, a)) in nums and v == c
        if op == "!=":
            return lambda d, i, a: (
                (v := get(d, i, a)) is not None and not (type(v) in nums and v == c)
            )
        if op == "<":
            return lambda d, i, a: type(v := get(d, i, a)) in nums and v < c
        if op == "<=":
            return lambda d, i, a: type(v := get(d, i, a)) in nums and v <= c
        if op == ">":
            return lambda d, i, a: type(v := get(d, i, a)) in nums and v > c
        return lambda d, i, a: type(v := get(d, i, a)) in nums and v >= c
    if kind == "string" and op in ("=", "!="):
        if op == "=":
            return lambda d, i, a: type(v := get(d, i, a)) is str and v == c
        return lambda d, i, a: (v := get(d, i, a)) is not None and not (type(v) is str and v == c)
    if kind == "boolean" and op in ("=", "!="):
        if op == "=":
            return lambda d, i, a: get(d, i, a) is c
        return lambda d, i, a: (v := get(d, i, a)) is not None and v is not c
    return lambda d, i, a: compare_values(get(d, i, a), op, c)


def _in(operand: _Operand, values: list[Any]) -> Predicate:
    strs = frozenset(v for v in values if json_kind(v) == "string")
    nums = frozenset(v for v in values if json_kind(v) == "number")
    bools = frozenset(v for v in values if json_kind(v) == "boolean")
    get = _getter(operand)

    def pred(d: Mapping[str, Any], i: Mapping[str, Any], a: Mapping[str, Any]) -> bool:
        v = get(d, i, a)
        t = type(v)
        if t is str:
            return v in strs
        if t is int or t is float:
            return v in nums
        if t is bool:
            return v in bools
        return False

    return pred


def _member(array: _Operand, element: _Operand) -> Predicate:
    """True iff `array` holds a JSON array with an element equal (`=`) to `element`.

    Two-valued (DESIGN §3, DSL 2.1): a NULL element, a missing path or a value that is
    not an array (a string, an object) makes it false, never unknown.
    """
    get_array, get_element = _getter(array), _getter(element)

    def pred(d: Mapping[str, Any], i: Mapping[str, Any], a: Mapping[str, Any]) -> bool:
        items = get_array(d, i, a)
        if not isinstance(items, list | tuple):
            return False
        value = get_element(d, i, a)
        if value is None:
            return False
        return any(compare_values(item, "=", value) for item in items)

    return pred


def _has_key(left: _Operand, right: _Operand) -> Predicate:
    get, key = _getter(left), _getter(right)

    def pred(d: Mapping[str, Any], i: Mapping[str, Any], a: Mapping[str, Any]) -> bool:
        obj, k = get(d, i, a), key(d, i, a)
        return isinstance(obj, Mapping) and type(k) is str and k in obj

    return pred
