"""Timers: register, cancel, and claim due ones exactly once across nodes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, insert, select, update

from stateward.persistence.base import Repository, to_record
from stateward.persistence.models_ops import Schedule
from stateward.records import ScheduleRecord

S = cast(Table, Schedule.__table__)
PENDING = "pending"
FIRED = "fired"
CANCELLED = "cancelled"
NOT_APPLICABLE = "not_applicable"
#: The timer's action failed: recorded by a `$timer {failed}` event (an incident, issue 15).
FAILED = "failed"


def _record(row: Any) -> ScheduleRecord:
    return to_record(ScheduleRecord, row)


class ScheduleRepository(Repository):
    """`schedules` rows. Claim in the unit of work that writes the timer's event."""

    async def add(
        self,
        process_id: str,
        action: str,
        due_at: datetime,
        now: datetime,
        *,
        key: str | None = None,
        created_seq: int | None = None,
    ) -> ScheduleRecord:
        """Register a pending timer; a pending timer with the same key is replaced."""
        if key is not None:
            await self.cancel(process_id, key=key)
        stmt = (
            insert(S)
            .values(
                process_id=process_id,
                action=action,
                key=key,
                due_at=due_at,
                status=PENDING,
                created_at=now,
                created_seq=created_seq,
            )
            .returning(*S.c)
        )
        return _record((await self.session.execute(stmt)).one())

    async def cancel(
        self, process_id: str, *, key: str | None = None, action: str | None = None
    ) -> int:
        """Cancel the process's pending timers with this key or action (all when neither)."""
        stmt = update(S).where(S.c.process_id == process_id, S.c.status == PENDING)
        if key is not None:
            stmt = stmt.where(S.c.key == key)
        if action is not None:
            stmt = stmt.where(S.c.action == action)
        result = await self.session.execute(stmt.values(status=CANCELLED))
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def claim_due_schedules(
        self, now: datetime, limit: int, node: str
    ) -> list[ScheduleRecord]:
        """Mark up to `limit` due pending timers `fired` by `node`; returns those won.

        The status goes pending -> fired in a conditional UPDATE, so each timer is
        returned to exactly one caller; a rollback of the caller's unit of work puts
        it back to pending. Use `finish` to record `not_applicable` instead.
        """
        due = and_(S.c.status == PENDING, S.c.due_at <= now)
        candidates = select(S.c.id).where(due).order_by(S.c.due_at, S.c.id).limit(limit)
        ids = await self.lock_candidates(candidates)
        if not ids:
            return []
        stmt = (
            update(S)
            .where(S.c.id.in_(ids), due)
            .values(status=FIRED, fired_at=now, claimed_by=node, claimed_at=now)
            .returning(*S.c)
        )
        rows = [_record(r) for r in await self.session.execute(stmt)]
        return sorted(rows, key=lambda r: (r.due_at, r.id))

    async def finish(self, schedule_id: int, status: str, detail: str | None = None) -> None:
        """Record the outcome of a fired timer (e.g. `not_applicable` with the reason)."""
        stmt = update(S).where(S.c.id == schedule_id).values(status=status, detail=detail)
        await self.session.execute(stmt)

    async def for_process(self, process_id: str, status: str | None = None) -> list[ScheduleRecord]:
        """The process's timers (optionally of one status), by due time."""
        stmt = select(S).where(S.c.process_id == process_id).order_by(S.c.due_at, S.c.id)
        if status is not None:
            stmt = stmt.where(S.c.status == status)
        return [_record(r) for r in await self.session.execute(stmt)]

    async def next_due_at(self) -> datetime | None:
        """When the earliest pending timer is due (lets a scheduler sleep precisely)."""
        stmt = select(S.c.due_at).where(S.c.status == PENDING).order_by(S.c.due_at).limit(1)
        value = (await self.session.execute(stmt)).scalar_one_or_none()
        return None if value is None else cast(datetime, value)
