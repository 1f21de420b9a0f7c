"""What every repository shares: its session, row -> record mapping, portable upserts."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any, TypeVar

from sqlalchemy import Row, Select, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import Insert

R = TypeVar("R")

#: Upper bound on the ids sent in one IN (...) (SQLite's variable limit is 32766).
CHUNK = 900


class Repository:
    """Base of the repositories: holds the unit of work's session (never shared)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    @property
    def dialect(self) -> str:
        """'sqlite' or 'postgresql'."""
        return self.session.get_bind().dialect.name

    async def lock_candidates(self, candidates: Select[Any]) -> list[Any]:
        """The ids selected by `candidates` (a one-column SELECT), locked `FOR UPDATE SKIP
        LOCKED` on PostgreSQL so concurrent claimers spread over different rows; the caller
        then claims them with a conditional UPDATE that re-checks the same condition."""
        if self.dialect == "postgresql":
            candidates = candidates.with_for_update(skip_locked=True)
        return list((await self.session.execute(candidates)).scalars())

    def insert_ignoring_conflicts(
        self, table: Table, values: Mapping[str, Any], conflict: Sequence[str]
    ) -> Insert:
        """`INSERT ... ON CONFLICT (conflict) DO NOTHING` for this dialect."""
        if self.dialect == "postgresql":
            return (
                postgresql.insert(table)
                .values(**values)
                .on_conflict_do_nothing(index_elements=list(conflict))
            )
        return (
            sqlite.insert(table)
            .values(**values)
            .on_conflict_do_nothing(index_elements=list(conflict))
        )


def to_record(cls: type[R], row: Any) -> R:
    """Build the frozen record `cls` from a mapped object or a result row (same names).

    A result row is read by position: its columns' order is known once per result
    layout, and a `Row`'s attribute lookup by name costs ≈ 0.6 µs a column (≈ 28 µs for
    a process row against ≈ 6 µs by position; docs/performance.md, `row18`)."""
    layout = getattr(row._parent, "_keys", None) if isinstance(row, Row) else None
    if layout is not None:
        keys = tuple(layout)  # the result's column names, in order
        try:
            reader = _ROW_READERS[(cls, keys)]
        except KeyError:
            reader = _ROW_READERS[(cls, keys)] = _row_reader(cls, keys)
        if reader is not None:
            return reader(row)  # type: ignore[no-any-return]
    names, values = _named_reader(cls)
    return cls(**dict(zip(names, values(row), strict=True)))


#: Per record class: its field names and one getter of all of them (`dataclasses.fields`
#: per row was a fifth of reading 1,000 events; issue 16).
_READERS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}
#: Per (record class, a result's column names): the record built from the row's values
#: by position, or None when a field's column is missing or named twice (read by name
#: then, which fails as it always did). Bounded: a layout is one statement's columns.
_ROW_READERS: dict[tuple[type, tuple[str, ...]], Callable[[Any], Any] | None] = {}
_ROW_READERS_MAX = 4096


def _named_reader(cls: type) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
    reader = _READERS.get(cls)
    if reader is None:
        names = tuple(f.name for f in fields(cls))
        getter = operator.attrgetter(*names)
        single = len(names) == 1
        reader = _READERS[cls] = (names, (lambda row: (getter(row),)) if single else getter)
    return reader


def _row_reader(cls: type, keys: tuple[str, ...]) -> Callable[[Any], Any] | None:
    """`cls` built from a row whose columns are named `keys`, by position."""
    if len(_ROW_READERS) >= _ROW_READERS_MAX:
        _ROW_READERS.clear()
    declared = fields(cls)
    names = [f.name for f in declared]
    if any(keys.count(name) != 1 for name in names):
        return None
    indexes = [keys.index(name) for name in names]
    positional = all(f.init and not f.kw_only for f in declared)
    if len(names) == 1:
        (index,), (name,) = indexes, names
        if positional:
            return lambda row: cls(row[index])
        return lambda row: cls(**{name: row[index]})
    getter = operator.itemgetter(*indexes)
    if positional:
        return lambda row: cls(*getter(row))
    return lambda row: cls(**dict(zip(names, getter(row), strict=True)))


def chunks(values: Iterable[R], size: int = CHUNK) -> Iterable[list[R]]:
    """`values` in lists of at most `size` (keeps IN lists under driver limits)."""
    batch: list[R] = []
    for v in values:
        batch.append(v)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
