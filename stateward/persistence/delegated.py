"""Delegated tasks (issue 13): open, close, lock (conditional), look up by token, list.

Every change of a task row is a conditional UPDATE whose rowcount says who won, like the
claims of assignments: of two workers locking one task, exactly one gets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, func, insert, or_, select, update

from stateward.persistence import keyset
from stateward.persistence.base import Repository, to_record
from stateward.persistence.keyset import SortKey
from stateward.persistence.models_ops import DelegatedTask
from stateward.records import DelegatedTaskRecord

T = cast(Table, DelegatedTask.__table__)
OPEN = "open"
COMPLETED = "completed"
CLOSED = "closed"
_COLUMNS = tuple(f.name for f in fields(DelegatedTaskRecord))


def _record(row: Any) -> DelegatedTaskRecord:
    return to_record(DelegatedTaskRecord, row)


class DelegatedTaskRepository(Repository):
    """`delegated_tasks` rows."""

    async def open(self, record: DelegatedTaskRecord) -> None:
        """Insert a new open task."""
        await self.session.execute(insert(T).values(**{c: getattr(record, c) for c in _COLUMNS}))

    async def get(self, task_id: str) -> DelegatedTaskRecord | None:
        """The task `task_id`, or None."""
        row = (await self.session.execute(select(T).where(T.c.id == task_id))).one_or_none()
        return None if row is None else _record(row)

    async def by_token(self, token_hash: str) -> DelegatedTaskRecord | None:
        """The task whose current callback token hashes to `token_hash`, or None."""
        stmt = select(T).where(T.c.token_hash == token_hash)
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else _record(row)

    async def close_open_for_process(
        self, process_id: str, now: datetime, *, completed_by: str | None = None
    ) -> list[str]:
        """Close every open task of the process (it left the state): `completed` for the
        task `completed_by` (its delegate acted), `closed` for the others; every token
        stops working (the hash stays, so a late caller learns the stage is over).
        Returns the ids closed."""
        stmt = select(T.c.id).where(T.c.process_id == process_id, T.c.status == OPEN)
        ids = [r.id for r in await self.session.execute(stmt)]
        for task_id in ids:
            status = COMPLETED if task_id == completed_by else CLOSED
            await self.session.execute(
                update(T)
                .where(T.c.id == task_id)
                .values(status=status, closed_at=now, locked_until=None)
            )
        return ids

    async def lock(
        self,
        task_id: str,
        worker: str,
        token_hash: str,
        now: datetime,
        until: datetime,
        namespaces: Sequence[str],
    ) -> bool:
        """Lease the open task to `worker` until `until` with a new token, if nobody holds
        an unexpired lease on it (or `worker` itself renews) and it is in one of
        `namespaces`. False = not open, not visible, or another worker holds it."""
        result = await self.session.execute(
            update(T)
            .where(
                T.c.id == task_id,
                T.c.status == OPEN,
                T.c.namespace.in_(list(namespaces)),
                or_(T.c.locked_until.is_(None), T.c.locked_until <= now, T.c.locked_by == worker),
            )
            .values(
                locked_by=worker,
                locked_until=until,
                token_hash=token_hash,
                token_expires_at=until,
            )
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def open_tasks(
        self,
        namespaces: Sequence[str],
        *,
        surface: str | None,
        now: datetime,
        available_only: bool,
        after: tuple[datetime, str] | None,
        limit: int,
        backward: bool = False,
    ) -> list[DelegatedTaskRecord]:
        """Open tasks of `namespaces` and the namespaces below them (of `surface` when
        given), oldest first, keyset-paged past `after`; `available_only` leaves out
        those under an unexpired lease. `backward`: the mirrored order (newest first),
        the ones older than `after` (to page backward; the caller reverses them)."""
        stmt = select(T).where(T.c.status == OPEN).order_by(T.c.created_at, T.c.id).limit(limit)
        keys = [SortKey(T.c.created_at), SortKey(T.c.id)]
        if backward:
            stmt = select(T).where(T.c.status == OPEN)
            stmt = stmt.order_by(*keyset.order_by(keys, backward=True)).limit(limit)
            if after is not None:
                stmt = stmt.where(keyset.after(keys, after, backward=True))
                after = None
        stmt = stmt.where(*_open_scope(namespaces, surface, now, available_only))
        if after is not None:
            created, tid = after
            stmt = stmt.where(
                (T.c.created_at > created) | ((T.c.created_at == created) & (T.c.id > tid))
            )
        return [_record(r) for r in await self.session.execute(stmt)]

    async def count_open(
        self, namespaces: Sequence[str], *, surface: str | None, now: datetime,
        available_only: bool,
    ) -> int:  # fmt: skip
        """How many tasks `open_tasks` pages through (all pages)."""
        stmt = select(func.count()).select_from(T).where(T.c.status == OPEN)
        stmt = stmt.where(*_open_scope(namespaces, surface, now, available_only))
        return int((await self.session.execute(stmt)).scalar_one())


def _open_scope(
    namespaces: Sequence[str], surface: str | None, now: datetime, available_only: bool
) -> list[Any]:
    """The filters of `open_tasks` besides the status and the keyset position."""
    where: list[Any] = []
    if "system" not in namespaces:  # a grant in `system` covers every namespace
        where.append(
            or_(
                *(
                    (T.c.namespace == ns) | T.c.namespace.startswith(f"{ns}/", autoescape=True)
                    for ns in namespaces
                )
            )
        )
    if surface is not None:
        where.append(T.c.surface == surface)
    if available_only:
        where.append(or_(T.c.locked_until.is_(None), T.c.locked_until <= now))
    return where
