"""Exactly-once claims for the periodic sweeps: SLA warnings/breaches and staleness.

Each claim is a conditional UPDATE (`... WHERE <mark> IS NULL`) on candidates found by an
indexed range query, so among concurrent scanners (threads, nodes) each mark is won by
exactly one caller. On PostgreSQL candidates are also locked `FOR UPDATE SKIP LOCKED` so
scanners spread over different rows instead of queueing. Claim inside the unit of work that
writes the resulting event: if that transaction rolls back, the claim is undone with it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, select, update

from stateward.domain.model import ACTIVE, LIVE_STATUSES, STALE
from stateward.persistence.base import Repository
from stateward.persistence.processes import P, ProcessRepository
from stateward.records import INSTANCE, ProcessRecord, SlaClaim

WARNING = "warning"
BREACH = "breach"

#: kind -> (deadline column, fired-mark column)
_SLA_COLUMNS: dict[str, tuple[Any, Any]] = {
    WARNING: (P.c.sla_warn_at, P.c.sla_warned_at),
    BREACH: (P.c.sla_due_at, P.c.sla_breached_at),
}


class SweepRepository(Repository):
    """Claims due SLA marks and stale instances, each exactly once."""

    async def claim_due_sla(self, now: datetime, limit: int, kind: str) -> list[SlaClaim]:
        """Mark up to `limit` due `kind` ('warning'|'breach') SLA deadlines as fired at `now`.

        Returns only the rows this call won (another scanner's rows are never returned).
        """
        if kind not in _SLA_COLUMNS:
            raise ValueError(f"unknown SLA kind {kind!r}: use 'warning' or 'breach'")
        deadline, mark = _SLA_COLUMNS[kind]
        due = and_(
            deadline.is_not(None),
            deadline <= now,
            mark.is_(None),
            P.c.status.in_(LIVE_STATUSES),
        )
        candidates = select(P.c.id).where(due).order_by(deadline).limit(limit)
        ids = await self.lock_candidates(candidates)
        if not ids:
            return []
        stmt = update(P).where(P.c.id.in_(ids), due).values({mark.name: now}).returning(P.c.id)
        won = list((await self.session.execute(stmt)).scalars())
        claims = [
            SlaClaim(kind=kind, deadline=getattr(record, deadline.name), process=record)
            for record in await self._records(won)
        ]
        return sorted(claims, key=lambda c: (c.deadline, c.process.id))

    async def mark_stale(self, cutoff: datetime, limit: int, now: datetime) -> list[ProcessRecord]:
        """Turn up to `limit` active instances with no event since `cutoff` into `stale`.

        Returns the `ProcessRecord`s this call changed (status already `stale`).
        """
        idle = and_(
            P.c.kind == INSTANCE,
            P.c.status == ACTIVE,
            P.c.last_event_at < cutoff,
        )
        candidates = select(P.c.id).where(idle).order_by(P.c.last_event_at).limit(limit)
        ids = await self.lock_candidates(candidates)
        if not ids:
            return []
        stmt = (
            update(P)
            .where(P.c.id.in_(ids), idle)
            .values(status=STALE, updated_at=now)
            .returning(P.c.id)
        )
        records = await self._records(list((await self.session.execute(stmt)).scalars()))
        return sorted(records, key=lambda r: (r.last_event_at, r.id))

    async def _records(self, ids: list[str]) -> list[ProcessRecord]:
        """The processes `ids` as this transaction now sees them, their data included
        (the claim's UPDATE returns the ids it won; the data is in `process_data`)."""
        return list((await ProcessRepository(self.session).processes_by_ids(ids)).values())
