"""Review-queue assignments: open, claim (conditional), unclaim, complete, cancel, queues."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Select, Table, and_, exists, func, insert, or_, select, update

from stateward.persistence.base import Repository, chunks, to_record
from stateward.persistence.models_ops import Assignment, AssignmentCandidate
from stateward.records import AssignmentRecord

A = cast(Table, Assignment.__table__)
C = cast(Table, AssignmentCandidate.__table__)
UNASSIGNED = "unassigned"
CLAIMED = "claimed"
COMPLETED = "completed"
CANCELLED = "cancelled"
OPEN = (UNASSIGNED, CLAIMED)
_COLUMNS = tuple(f.name for f in fields(AssignmentRecord))


def _record(row: Any) -> AssignmentRecord:
    return to_record(AssignmentRecord, row)


def queue_filters(
    stmt: Select[Any],
    *,
    team: str | None,
    assignee: str | None,
    status: str | None,
    after: tuple[datetime, str] | None,
) -> Select[Any]:
    """`stmt` (a SELECT over `assignments`, ordered by (created_at, id)) narrowed to the
    queue's team / assignee / status and keyset-paged past `after`; every queue view
    filters the same way."""
    if team is not None:
        stmt = stmt.where(A.c.team == team)
    if assignee is not None:
        stmt = stmt.where(A.c.assignee == assignee)
    if status is not None:
        stmt = stmt.where(A.c.status == status)
    if after is not None:
        created, aid = after
        stmt = stmt.where(
            (A.c.created_at > created) | ((A.c.created_at == created) & (A.c.id > aid))
        )
    return stmt


class AssignmentRepository(Repository):
    """`assignments` rows; every state change is a conditional UPDATE (rowcount = won)."""

    async def open(self, record: AssignmentRecord) -> None:
        """Insert a new assignment (normally status `unassigned`) and its candidate rows."""
        await self.session.execute(insert(A).values(**{c: getattr(record, c) for c in _COLUMNS}))
        users = sorted(set(record.candidate_users or ()))
        if users:
            await self.session.execute(
                insert(C), [{"assignment_id": record.id, "candidate": u} for u in users]
            )

    async def count_rotation(self, workflow: str, state: str, team: str) -> int:
        """How many assignments of `team` the instances of `workflow` opened in `state`
        (the turn counter of `auto_assign: round_robin`)."""
        from stateward.persistence.models import Process

        P = cast(Table, Process.__table__)
        stmt = (
            select(func.count())
            .select_from(A.join(P, P.c.id == A.c.process_id))
            .where(P.c.workflow == workflow, A.c.state == state, A.c.team == team)
        )
        return int((await self.session.execute(stmt)).scalar_one())

    async def get(self, assignment_id: str) -> AssignmentRecord | None:
        """The assignment `assignment_id`, or None."""
        row = (await self.session.execute(select(A).where(A.c.id == assignment_id))).one_or_none()
        return None if row is None else _record(row)

    async def by_ids(self, ids: Iterable[str]) -> dict[str, AssignmentRecord]:
        """Batch loader: assignments by id."""
        found: dict[str, AssignmentRecord] = {}
        for batch in chunks(dict.fromkeys(ids)):
            for row in await self.session.execute(select(A).where(A.c.id.in_(batch))):
                found[row.id] = _record(row)
        return found

    async def assignments_by_process(
        self, process_ids: Iterable[str], *, open_only: bool = False
    ) -> dict[str, list[AssignmentRecord]]:
        """Batch loader: each process's assignments, oldest first."""
        found: dict[str, list[AssignmentRecord]] = {}
        for batch in chunks(dict.fromkeys(process_ids)):
            stmt = select(A).where(A.c.process_id.in_(batch)).order_by(A.c.created_at, A.c.id)
            if open_only:
                stmt = stmt.where(A.c.status.in_(OPEN))
            for row in await self.session.execute(stmt):
                found.setdefault(row.process_id, []).append(_record(row))
        return found

    async def open_for_process(self, process_id: str) -> list[AssignmentRecord]:
        """The process's unassigned or claimed assignments."""
        return (await self.assignments_by_process([process_id], open_only=True)).get(process_id, [])

    async def queue(
        self,
        *,
        team: str | None = None,
        assignee: str | None = None,
        status: str | None = None,
        after: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> list[AssignmentRecord]:
        """A queue: by team and/or assignee and status, oldest first, keyset-paged."""
        stmt = select(A).order_by(A.c.created_at, A.c.id).limit(limit)
        stmt = queue_filters(stmt, team=team, assignee=assignee, status=status, after=after)
        return [_record(r) for r in await self.session.execute(stmt)]

    async def count_queue(self, *, assignee: str, status: str | None = None) -> int:
        """How many rows `queue(assignee=..., status=...)` lists over all its pages."""
        stmt = select(func.count()).select_from(A)
        stmt = queue_filters(stmt, team=None, assignee=assignee, status=status, after=None)
        return int((await self.session.execute(stmt)).scalar_one())

    @staticmethod
    def _mine(actor: str, readable: Sequence[str]) -> Any:
        """Claimed by `actor`, or unassigned with `actor` among its candidate users in a
        namespace it may read (`readable`, or below): a workflow of another tenant naming
        it a candidate must not show that tenant's assignments."""
        from stateward.persistence.kernel import namespace_scope
        from stateward.persistence.processes import P

        candidate = exists().where(C.c.assignment_id == A.c.id, C.c.candidate == actor)
        inside = exists().where(P.c.id == A.c.process_id, namespace_scope(P.c.namespace, readable))
        open_candidacy = and_(A.c.status == UNASSIGNED, candidate, inside)
        return or_(A.c.assignee == actor, open_candidacy)

    async def mine(
        self, actor: str, *, readable: Sequence[str] = (), status: str | None = None,
        after: tuple[datetime, str] | None = None, limit: int = 50,
    ) -> list[AssignmentRecord]:  # fmt: skip
        """`myAssignments`: the actor's claims and its open candidacies, oldest first."""
        stmt = select(A).where(self._mine(actor, readable))
        stmt = stmt.order_by(A.c.created_at, A.c.id).limit(limit)
        stmt = queue_filters(stmt, team=None, assignee=None, status=status, after=after)
        return [_record(r) for r in await self.session.execute(stmt)]

    async def count_mine(
        self, actor: str, *, readable: Sequence[str] = (), status: str | None = None
    ) -> int:
        """How many rows `mine` lists over all its pages."""
        stmt = select(func.count()).select_from(A).where(self._mine(actor, readable))
        stmt = queue_filters(stmt, team=None, assignee=None, status=status, after=None)
        return int((await self.session.execute(stmt)).scalar_one())

    async def _change(self, where: list[Any], values: dict[str, Any]) -> bool:
        result = await self.session.execute(update(A).where(*where).values(**values))
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def claim_assignment(self, assignment_id: str, assignee: str, now: datetime) -> bool:
        """Claim for `assignee` if still unassigned. False = someone else won the race."""
        return await self._change(
            [A.c.id == assignment_id, A.c.status == UNASSIGNED],
            {"status": CLAIMED, "assignee": assignee, "claimed_at": now},
        )

    async def unclaim(self, assignment_id: str, assignee: str | None = None) -> bool:
        """Put a claimed assignment back (only `assignee`'s claim when given)."""
        where = [A.c.id == assignment_id, A.c.status == CLAIMED]
        if assignee is not None:
            where.append(A.c.assignee == assignee)
        return await self._change(
            where, {"status": UNASSIGNED, "assignee": None, "claimed_at": None}
        )

    async def complete(
        self, assignment_id: str, assignee: str, review_data: Any, now: datetime
    ) -> bool:
        """Complete `assignee`'s claimed assignment with its review data."""
        return await self._change(
            [A.c.id == assignment_id, A.c.status == CLAIMED, A.c.assignee == assignee],
            {"status": COMPLETED, "review_data": review_data, "completed_at": now},
        )

    async def cancel(self, assignment_id: str, now: datetime) -> bool:
        """Cancel an open assignment; False when it was already closed."""
        return await self._change(
            [A.c.id == assignment_id, A.c.status.in_(OPEN)],
            {"status": CANCELLED, "cancelled_at": now},
        )

    async def cancel_open_for_process(
        self, process_id: str, now: datetime
    ) -> list[AssignmentRecord]:
        """Cancel every open assignment of the process (it left the state); returns them."""
        stmt = (
            update(A)
            .where(A.c.process_id == process_id, A.c.status.in_(OPEN))
            .values(status=CANCELLED, cancelled_at=now)
            .returning(*A.c)
        )
        rows = [_record(r) for r in await self.session.execute(stmt)]
        return sorted(rows, key=lambda r: (r.created_at, r.id))
