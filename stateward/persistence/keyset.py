"""Keyset pagination in SQL: a total order over sort keys, and "rows after this position".

A listing is ordered by one or more `SortKey`s (the last one unique, e.g. the id). Paging
forward walks that order with NULLs last; paging backward walks its exact mirror (every
direction flipped, NULLs first) and the caller reverses the page. `after(keys, values,
backward)` is the WHERE clause for "strictly after the row whose keys were `values`":

- no nullable key and one direction: a row-value comparison `(a, b) > (:a, :b)`, which
  both databases answer with a range scan of an index on `(a, b)`;
- otherwise the expanded form `a > :a OR (a = :a AND b > :b) ...`, with NULLs handled so
  the order stays total.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, false, literal, or_, true, tuple_
from sqlalchemy.sql.elements import ColumnElement


@dataclass(frozen=True)
class SortKey:
    """One sort expression of a listing's order."""

    expr: ColumnElement[Any]
    descending: bool = False
    nullable: bool = False


def order_by(keys: Sequence[SortKey], backward: bool = False) -> list[Any]:
    """ORDER BY clauses: each key in its direction, NULLs last (mirrored when `backward`)."""
    clauses: list[Any] = []
    for key in keys:
        clause = key.expr.desc() if key.descending != backward else key.expr.asc()
        if key.nullable:
            clause = clause.nulls_first() if backward else clause.nulls_last()
        clauses.append(clause)
    return clauses


def _bind(key: SortKey, value: Any) -> Any:
    return literal(value, key.expr.type)


def _beyond(key: SortKey, value: Any, backward: bool) -> ColumnElement[bool]:
    descending = key.descending != backward
    if value is None:  # among NULLs: nothing beyond when they come last
        return key.expr.is_not(None) if backward else false()
    bound = _bind(key, value)
    compare = key.expr < bound if descending else key.expr > bound
    if key.nullable and not backward:
        return or_(compare, key.expr.is_(None))
    return compare


def _equal(key: SortKey, value: Any) -> ColumnElement[bool]:
    return key.expr.is_(None) if value is None else key.expr == _bind(key, value)


def after(keys: Sequence[SortKey], values: Sequence[Any], backward: bool = False) -> Any:
    """Rows strictly after the position `values` in the (forward or mirrored) order."""
    if len(values) != len(keys):
        raise ValueError("a keyset position has one value per sort key")
    directions = {k.descending for k in keys}
    if len(directions) == 1 and not any(k.nullable for k in keys):
        row = tuple_(*(k.expr for k in keys))
        bound = tuple_(*(_bind(k, v) for k, v in zip(keys, values, strict=True)))
        return row < bound if directions.pop() != backward else row > bound
    terms = []
    for n, key in enumerate(keys):
        equal = [_equal(k, v) for k, v in zip(keys[:n], values[:n], strict=True)]
        terms.append(and_(true(), *equal, _beyond(key, values[n], backward)))
    return or_(*terms)
