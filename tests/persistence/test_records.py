"""`to_record`: result rows read by position give the record reading by name gave."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from sqlalchemy import create_engine, text

from stateward.persistence import base
from stateward.persistence.base import to_record
from stateward.records import ProcessRecord


@dataclass(frozen=True)
class Pair:
    a: int
    b: str


@dataclass(frozen=True)
class Keyworded:
    a: int
    b: str = field(kw_only=True)


@dataclass(frozen=True)
class Single:
    b: str


def _row(sql: str) -> object:
    with create_engine("sqlite://").connect() as conn:
        return conn.execute(text(sql)).one()


def test_columns_in_any_order_with_extra_ones() -> None:
    row = _row("SELECT 'x' AS b, 7 AS sort_value, 1 AS a")
    assert to_record(Pair, row) == Pair(a=1, b="x")
    assert to_record(Keyworded, row) == Keyworded(1, b="x")
    assert to_record(Single, row) == Single(b="x")


def test_a_missing_column_fails_as_by_name() -> None:
    with pytest.raises(AttributeError):
        to_record(Pair, _row("SELECT 1 AS a"))


def test_a_column_named_twice_is_read_by_name() -> None:
    # By position the first `b` would win; by name the row decides (here the last).
    row = _row("SELECT 1 AS a, 'x' AS b, 'y' AS b")
    assert to_record(Pair, row) == Pair(a=1, b=row.b) == Pair(a=1, b="y")


def test_mapped_objects_and_plain_objects_are_read_by_name() -> None:
    class Obj:
        a, b = 2, "z"

    assert to_record(Pair, Obj()) == Pair(a=2, b="z")


def test_the_layout_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_ROW_READERS_MAX", 3)
    base._ROW_READERS.clear()
    for n in range(10):
        row = _row(f"SELECT 1 AS a, 'x' AS b, {n} AS c{n}")
        assert to_record(Pair, row) == Pair(a=1, b="x")
    assert len(base._ROW_READERS) <= 3


def test_process_record_fields_come_from_their_columns() -> None:
    names = [f for f in ProcessRecord.__dataclass_fields__]
    # every column once, reversed: each field must take its own column's value
    columns = ", ".join(f"'{name}' AS {name}" for name in reversed(names))
    record = to_record(ProcessRecord, _row(f"SELECT {columns}"))
    assert all(getattr(record, name) == name for name in names)
