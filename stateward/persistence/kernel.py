"""Reads and conditional writes of the kernel runtime services (DESIGN §7).

The periodic sweeps find their candidates here with indexed range queries whose cost
does not grow with the rows that are not due: SLA deadlines through the partial indexes
`ix_processes_sla_*_pending` (their predicate is repeated literally so SQLite can use
them; a fired mark takes the row out of the index), idle instances through
`(status, last_event_at)`, timers through `(status, due_at)`. Candidates are only hints:
the event that acts on one re-checks it inside its own transaction, and the marks written
here are conditional updates, so among concurrent scanners each fires exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Integer,
    String,
    Table,
    TextualSelect,
    and_,
    bindparam,
    column,
    false,
    func,
    or_,
    select,
    text,
    update,
)

from stateward.persistence.assignments import queue_filters
from stateward.persistence.base import Repository, to_record
from stateward.persistence.models import LIVE
from stateward.persistence.models_ops import Assignment, Notification, Schedule, WebhookDelivery
from stateward.persistence.processes import P
from stateward.persistence.schedules import FAILED, FIRED, NOT_APPLICABLE, PENDING
from stateward.persistence.types import UTCDateTime
from stateward.records import (
    AssignmentRecord,
    DeliveryRecord,
    NotificationRecord,
    ScheduleRecord,
)

A = cast(Table, Assignment.__table__)
S = cast(Table, Schedule.__table__)
D = cast(Table, WebhookDelivery.__table__)
N = cast(Table, Notification.__table__)
WARNING = "warning"
BREACH = "breach"
SYSTEM_NAMESPACE = "system"
#: kind -> (deadline column, fired-mark column); the partial indexes hold unfired rows.
SLA_COLUMNS: dict[str, tuple[Any, Any]] = {
    WARNING: (P.c.sla_warn_at, P.c.sla_warned_at),
    BREACH: (P.c.sla_due_at, P.c.sla_breached_at),
}


@dataclass(frozen=True)
class SlaCandidate:
    """A process whose SLA `kind` deadline is due (a hint for the scanner)."""

    kind: str
    process_id: str
    workflow: str
    state: str
    deadline: datetime


@dataclass(frozen=True)
class AutomationCandidate:
    """A live process whose system-state automation started before the sweep's cutoff
    and was not recorded since (a hint for the recovery sweep)."""

    process_id: str
    workflow: str
    workflow_version: int
    state: str
    seq: int
    started_at: datetime


#: The partial index holding the live rows whose current state awaits its automation.
AUTOMATION_INDEX = "ix_processes_automation_pending"
#: The partial index holding the unfired deadlines of each kind.
PENDING_INDEX = {WARNING: "ix_processes_sla_warn_pending", BREACH: "ix_processes_sla_due_pending"}


def sla_columns(kind: str) -> tuple[Any, Any]:
    """(deadline, mark) columns of an SLA kind; ValueError for anything else."""
    if kind not in SLA_COLUMNS:
        raise ValueError(f"unknown SLA kind {kind!r}: use 'warning' or 'breach'")
    return SLA_COLUMNS[kind]


def namespace_scope(column: Any, namespaces: Sequence[str]) -> Any:
    """`column` is one of `namespaces` or below one (`system` covers everything)."""
    if SYSTEM_NAMESPACE in namespaces:
        return text("1 = 1")
    if not namespaces:
        return false()
    # An escaped prefix match: `_` and `%` are legal in namespace names and must not act
    # as LIKE wildcards (a grant at `acme_corp` must not reach `acme-corp/...`).
    return or_(*(or_(column == n, column.startswith(f"{n}/", autoescape=True)) for n in namespaces))


class KernelRepository(Repository):
    """Candidates of the sweeps, their conditional marks, queues and delivery listings."""

    def due_sla_statement(self, kind: str, now: Any, limit: int) -> TextualSelect:
        """The scanner's query (see `due_sla`); `now` is bound, or given as SQL text.

        Written as SQL so SQLite can be told `INDEXED BY` the pending-only partial index
        (its planner would otherwise prefer `(status, last_event_at)`, which holds every
        live process, and SQLAlchemy renders no table hints for SQLite).
        """
        deadline, mark = sla_columns(kind)
        hint = f"INDEXED BY {PENDING_INDEX[kind]}" if self.dialect == "sqlite" else ""
        at = now if isinstance(now, str) else ":now"
        stmt = text(
            f"SELECT id, workflow, state, {deadline.name} AS deadline FROM processes {hint} "
            f"WHERE {deadline.name} <= {at} AND {mark.name} IS NULL AND {LIVE} "
            f"ORDER BY {deadline.name} LIMIT {int(limit)}"
        )
        if not isinstance(now, str):
            stmt = stmt.bindparams(bindparam("now", now, type_=UTCDateTime()))
        return stmt.columns(
            column("id", String), column("workflow", String), column("state", String),
            column("deadline", UTCDateTime()),
        )  # fmt: skip

    async def due_sla(self, kind: str, now: datetime, limit: int) -> list[SlaCandidate]:
        """Live processes whose `kind` deadline passed and has not fired, earliest first:
        a range scan of the pending-only partial index (cost independent of the rest)."""
        stmt = self.due_sla_statement(kind, now, limit)
        return [SlaCandidate(kind, *row) for row in await self.session.execute(stmt)]

    async def mark_sla(
        self, process_id: str, kind: str, now: datetime, last_event_at: datetime
    ) -> bool:
        """Record that `kind` fired (only if still unfired: True = this call won), which
        takes the row out of the pending index; `last_event_at` is kept as it was (an SLA
        event is bookkeeping, not activity that would postpone staleness)."""
        _, mark = sla_columns(kind)
        stmt = (
            update(P)
            .where(P.c.id == process_id, mark.is_(None))
            .values({mark.name: now, "last_event_at": last_event_at})
        )
        return bool((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    def pending_automation_statement(self, cutoff: Any, limit: int) -> TextualSelect:
        """The recovery sweep's query (see `pending_automation`); `cutoff` is bound, or
        given as SQL text. SQL text for the same reason as `due_sla_statement`."""
        hint = f"INDEXED BY {AUTOMATION_INDEX}" if self.dialect == "sqlite" else ""
        at = cutoff if isinstance(cutoff, str) else ":cutoff"
        stmt = text(
            f"SELECT id, workflow, workflow_version, state, seq, automation_at "
            f"FROM processes {hint} "
            f"WHERE automation_at <= {at} AND automation_at IS NOT NULL AND {LIVE} "
            f"ORDER BY automation_at LIMIT {int(limit)}"
        )
        if not isinstance(cutoff, str):
            stmt = stmt.bindparams(bindparam("cutoff", cutoff, type_=UTCDateTime()))
        return stmt.columns(
            column("id", String), column("workflow", String),
            column("workflow_version", Integer), column("state", String),
            column("seq", Integer), column("automation_at", UTCDateTime()),
        )  # fmt: skip

    async def pending_automation(self, cutoff: datetime, limit: int) -> list[AutomationCandidate]:
        """Live processes waiting for their system state's automation since `cutoff` or
        earlier, oldest first: a range scan of the pending-only partial index."""
        stmt = self.pending_automation_statement(cutoff, limit)
        return [AutomationCandidate(*row) for row in await self.session.execute(stmt)]

    async def claim_automation(
        self, process_id: str, seq: int, cutoff: datetime, at: datetime | None
    ) -> bool:
        """Move a candidate's `automation_at` to `at` (a claim: the row leaves the range
        until `at` is older than a later cutoff; None: nothing to automate), only if it
        is still at `seq` and pending since `cutoff` or earlier. True = this call won."""
        stmt = (
            update(P)
            .where(P.c.id == process_id, P.c.seq == seq, P.c.automation_at <= cutoff)
            .values(automation_at=at)
        )
        return bool((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def idle_instances(self, cutoff: datetime, limit: int) -> list[str]:
        """Active instances with no event since `cutoff`, longest idle first."""
        stmt = (
            select(P.c.id)
            .where(P.c.status == "active", P.c.last_event_at < cutoff, P.c.kind == "instance")
            .order_by(P.c.last_event_at)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).scalars())

    async def set_entry_token(self, process_id: str, token_hash: str) -> None:
        """Store the sha256 of an instance's entry token (replacing the previous one)."""
        stmt = update(P).where(P.c.id == process_id).values(entry_token_hash=token_hash)
        await self.session.execute(stmt)

    async def due_schedules(self, now: datetime, limit: int) -> list[ScheduleRecord]:
        """Pending timers due at `now`, earliest first (a hint: firing re-checks)."""
        stmt = (
            select(S)
            .where(S.c.status == PENDING, S.c.due_at <= now)
            .order_by(S.c.due_at, S.c.id)
            .limit(limit)
        )
        return [to_record(ScheduleRecord, r) for r in await self.session.execute(stmt)]

    async def schedule(self, schedule_id: int) -> ScheduleRecord | None:
        """One timer by id, or None."""
        row = (await self.session.execute(select(S).where(S.c.id == schedule_id))).one_or_none()
        return None if row is None else to_record(ScheduleRecord, row)

    async def close_schedule(
        self, schedule_id: int, status: str, now: datetime, node: str, detail: str | None = None
    ) -> bool:
        """pending -> `status` (fired | failed | not_applicable), conditionally: True = this
        call won."""
        if status not in (FIRED, FAILED, NOT_APPLICABLE):
            raise ValueError(f"a timer closes as fired, failed or not_applicable, not {status!r}")
        stmt = (
            update(S)
            .where(S.c.id == schedule_id, S.c.status == PENDING)
            .values(status=status, fired_at=now, claimed_by=node, claimed_at=now, detail=detail)
        )
        return bool((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def assignment_queue(
        self,
        *,
        namespaces: Sequence[str],
        team: str | None = None,
        assignee: str | None = None,
        status: str | None = None,
        after: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> list[AssignmentRecord]:
        """Assignments of instances in `namespaces` (or below), oldest first, keyset-paged."""
        stmt = (
            select(A)
            .join(P, P.c.id == A.c.process_id)
            .where(namespace_scope(P.c.namespace, namespaces))
            .order_by(A.c.created_at, A.c.id)
            .limit(limit)
        )
        stmt = queue_filters(stmt, team=team, assignee=assignee, status=status, after=after)
        return [to_record(AssignmentRecord, r) for r in await self.session.execute(stmt)]

    async def count_assignment_queue(
        self, *, namespaces: Sequence[str], team: str | None = None, status: str | None = None
    ) -> int:
        """How many rows `assignment_queue` lists over all its pages."""
        stmt = (
            select(func.count())
            .select_from(A)
            .join(P, P.c.id == A.c.process_id)
            .where(namespace_scope(P.c.namespace, namespaces))
        )
        stmt = queue_filters(stmt, team=team, assignee=None, status=status, after=None)
        return int((await self.session.execute(stmt)).scalar_one())

    async def deliveries(
        self, namespace: str | None = None, *, limit: int = 100, status: str | None = None,
        before_id: int | None = None, newer_than: int | None = None,
    ) -> list[DeliveryRecord]:  # fmt: skip
        """Webhook deliveries (of one namespace / status when given), newest first; with
        `before_id`, only those older than that delivery (keyset paging); with
        `newer_than`, those above that id, oldest first (to page backward). A namespace's
        include those of its workflows' own webhooks (scope `workflow:<ns>/...`) and of its
        surfaces' (scope `surface:<ns>:...`)."""
        stmt = select(D).order_by(D.c.id.desc()).limit(limit)
        if newer_than is not None:
            stmt = select(D).where(D.c.id > newer_than).order_by(D.c.id.asc()).limit(limit)
        stmt = stmt.where(*self._delivery_scope(namespace, status))
        if before_id is not None:
            stmt = stmt.where(D.c.id < before_id)
        return [to_record(DeliveryRecord, r) for r in await self.session.execute(stmt)]

    async def count_deliveries(self, namespace: str | None, status: str | None) -> int:
        """How many deliveries `deliveries(namespace, status=...)` lists (all pages)."""
        stmt = select(func.count()).select_from(D).where(*self._delivery_scope(namespace, status))
        return int((await self.session.execute(stmt)).scalar_one())

    @staticmethod
    def _delivery_scope(namespace: str | None, status: str | None) -> list[Any]:
        where: list[Any] = []
        if namespace is not None:
            own = D.c.namespace.startswith(f"workflow:{namespace}/", autoescape=True)
            surface = D.c.namespace.startswith(f"surface:{namespace}:", autoescape=True)
            where.append(or_(D.c.namespace == namespace, own, surface))
        if status is not None:
            where.append(D.c.status == status)
        return where

    async def notifications_for(
        self,
        actor: str,
        teams: Sequence[tuple[str, str]],
        *,
        before_id: int | None = None,
        limit: int = 50,
        unread_only: bool = False,
        newer_than: int | None = None,
    ) -> list[NotificationRecord]:
        """The notifications of `actor` and of its teams, newest first (with `newer_than`:
        the ones above that id, oldest first, for paging backward).

        `teams` are (namespace, role) grants: a `team:<role>` notification is the actor's
        when it concerns that namespace or one below it (`system` grants cover all); the
        actor's own ones only where it holds some role (the read rule).
        """
        stmt = select(N).where(*self._notification_scope(actor, teams, unread_only))
        if newer_than is not None:
            stmt = stmt.where(N.c.id > newer_than).order_by(N.c.id.asc()).limit(limit)
        else:
            stmt = stmt.order_by(N.c.id.desc()).limit(limit)
        if before_id is not None:
            stmt = stmt.where(N.c.id < before_id)
        return [to_record(NotificationRecord, r) for r in await self.session.execute(stmt)]

    @staticmethod
    def _notification_scope(
        actor: str, teams: Sequence[tuple[str, str]], unread_only: bool
    ) -> list[Any]:
        readable = sorted({namespace for namespace, _ in teams})
        mine = [and_(N.c.recipient == actor, namespace_scope(N.c.namespace, readable))]
        for namespace, role in teams:
            mine.append(
                and_(
                    N.c.recipient == f"team:{role}",
                    namespace_scope(N.c.namespace, [namespace]),
                )
            )
        where = [or_(*mine)]
        if unread_only:
            where.append(N.c.read_at.is_(None))
        return where

    async def count_notifications(
        self, actor: str, teams: Sequence[tuple[str, str]], *, unread_only: bool = False
    ) -> int:
        """How many notifications `notifications_for` would list (all pages)."""
        stmt = select(func.count()).select_from(N)
        stmt = stmt.where(*self._notification_scope(actor, teams, unread_only))
        return int((await self.session.execute(stmt)).scalar_one())

    async def mark_notifications_read(
        self, ids: Sequence[int], actor: str, teams: Sequence[tuple[str, str]], now: datetime
    ) -> list[int]:
        """Mark those of `ids` that are the actor's (or its teams') and unread as read;
        the ids marked."""
        where = [N.c.id.in_(list(ids)), *self._notification_scope(actor, teams, True)]
        found = await self.session.execute(select(N.c.id).where(*where))
        marked = sorted(found.scalars())
        if marked:
            await self.session.execute(update(N).where(N.c.id.in_(marked)).values(read_at=now))
        return marked
