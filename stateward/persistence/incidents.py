"""Incident rows (issue 15): opened, recounted and resolved by the core write path only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Select, Table, and_, func, insert, or_, select, update

from stateward.persistence import keyset
from stateward.persistence.base import Repository, to_record
from stateward.persistence.keyset import SortKey
from stateward.persistence.models_incidents import Incident
from stateward.records import IncidentRecord

T = cast(Table, Incident.__table__)


@dataclass(frozen=True)
class IncidentQuery:
    """What `incidents(filter)` selects. `namespaces` None = every namespace (a system
    admin); else only those (the caller's operable namespaces, never widened by a filter)."""

    namespaces: Sequence[str] | None = None
    namespace: str | None = None
    workflow: str | None = None
    kinds: Sequence[str] = ()
    resolved: bool | None = None
    process_id: str | None = None


class IncidentRepository(Repository):
    """`incidents`."""

    async def add(self, record: IncidentRecord) -> None:
        """Insert a new (open) incident."""
        await self.session.execute(insert(T).values(**record.__dict__))

    async def get(self, incident_id: str) -> IncidentRecord | None:
        """One incident."""
        row = (await self.session.execute(select(T).where(T.c.id == incident_id))).one_or_none()
        return None if row is None else to_record(IncidentRecord, row)

    async def open_for(self, process_id: str) -> IncidentRecord | None:
        """The process's open incident about its status, if any (at most one is open at a
        time; webhook incidents, about a delivery, are not among them)."""
        stmt = (
            select(T)
            .where(
                T.c.process_id == process_id,
                T.c.resolved_at.is_(None),
                T.c.delivery_id.is_(None),
            )
            .order_by(T.c.created_at.desc())
            .limit(1)
        )
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else to_record(IncidentRecord, row)

    async def open_for_delivery(self, delivery_id: int) -> IncidentRecord | None:
        """The open incident of a webhook delivery, if any."""
        stmt = select(T).where(T.c.delivery_id == delivery_id, T.c.resolved_at.is_(None)).limit(1)
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else to_record(IncidentRecord, row)

    async def deliveries_with_open_incidents(self, delivery_ids: Sequence[int]) -> set[int]:
        """Which of `delivery_ids` have an open incident (their success must resolve it)."""
        if not delivery_ids:
            return set()
        stmt = select(T.c.delivery_id).where(
            T.c.delivery_id.in_(list(delivery_ids)), T.c.resolved_at.is_(None)
        )
        return {int(d) for (d,) in await self.session.execute(stmt)}

    async def recount(self, incident_id: str, message: str, state: str, runs: int = 1) -> None:
        """`runs` more failed attempts of an open incident (after a `$retry`)."""
        await self.session.execute(
            update(T)
            .where(T.c.id == incident_id)
            .values(attempts=T.c.attempts + runs, message=message, state=state)
        )

    async def resolve(self, incident_id: str, at: datetime, seq: int, resolution: str) -> None:
        """Mark an open incident resolved."""
        await self.session.execute(
            update(T)
            .where(T.c.id == incident_id, T.c.resolved_at.is_(None))
            .values(resolved_at=at, resolved_seq=seq, resolution=resolution[:300])
        )

    async def page(
        self, query: IncidentQuery, limit: int, after: tuple[datetime, str] | None,
        backward: bool = False,
    ) -> list[IncidentRecord]:  # fmt: skip
        """Incidents newest first by (created_at, id), after the keyset position `after`
        (`backward`: the mirrored order, oldest first, the ones newer than `after`)."""
        if backward:
            keys = [SortKey(T.c.created_at, descending=True), SortKey(T.c.id, descending=True)]
            back = self._where(select(T), query)
            if after is not None:
                back = back.where(keyset.after(keys, after, backward=True))
            back = back.order_by(*keyset.order_by(keys, backward=True)).limit(limit)
            return [to_record(IncidentRecord, r) for r in await self.session.execute(back)]
        stmt = self._where(select(T), query)
        if after is not None:
            at, ident = after
            stmt = stmt.where(or_(T.c.created_at < at, and_(T.c.created_at == at, T.c.id < ident)))
        stmt = stmt.order_by(T.c.created_at.desc(), T.c.id.desc()).limit(limit)
        return [to_record(IncidentRecord, r) for r in await self.session.execute(stmt)]

    async def count(self, query: IncidentQuery) -> int:
        """How many incidents `query` selects."""
        stmt = self._where(select(func.count()).select_from(T), query)
        return int((await self.session.execute(stmt)).scalar_one())

    async def open_by_namespace(self) -> dict[str, int]:
        """Open incidents per namespace (the Prometheus gauge)."""
        stmt = (
            select(T.c.namespace, func.count())
            .where(T.c.resolved_at.is_(None))
            .group_by(T.c.namespace)
        )
        return {ns: int(n) for ns, n in await self.session.execute(stmt)}

    @staticmethod
    def _where(stmt: Select[Any], query: IncidentQuery) -> Select[Any]:
        if query.namespaces is not None:
            stmt = stmt.where(T.c.namespace.in_(list(query.namespaces)))
        if query.namespace is not None:
            stmt = stmt.where(T.c.namespace == query.namespace)
        if query.workflow is not None:
            stmt = stmt.where(T.c.workflow == query.workflow)
        if query.kinds:
            stmt = stmt.where(T.c.kind.in_(list(query.kinds)))
        if query.process_id is not None:
            stmt = stmt.where(T.c.process_id == query.process_id)
        if query.resolved is True:
            stmt = stmt.where(T.c.resolved_at.is_not(None))
        elif query.resolved is False:
            stmt = stmt.where(T.c.resolved_at.is_(None))
        return stmt
