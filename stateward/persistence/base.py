"""What every repository shares: its session, row -> record mapping, portable upserts."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any, TypeVar

from sqlalchemy import Select, Table
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
    """Build the frozen record `cls` from a mapped object or a result row (same names)."""
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = _reader(cls)
    names, values = reader
    return cls(**dict(zip(names, values(row), strict=True)))


#: Per record class: its field names and one getter of all of them (`dataclasses.fields`
#: per row was a fifth of reading 1,000 events; issue 16).
_READERS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}


def _reader(cls: type) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
    names = tuple(f.name for f in fields(cls))
    getter = operator.attrgetter(*names)
    if len(names) == 1:
        return names, lambda row: (getter(row),)
    return names, getter


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
