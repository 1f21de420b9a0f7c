"""The sequencer step: the ONE place a writing transaction takes the global lock.

Every writing unit of work ends with `sequence_and_commit(uow)` (`UnitOfWork.commit`
calls it). Lock order, which makes deadlocks between nodes impossible by construction
(docs/decisions.md, "Lock order"):

1. **process rows**, `FOR UPDATE`, in ascending id order, taken at the start of the
   transaction (`ProcessRepository.lock`; a one-event transaction locks its one row with
   `get(for_update=True)`), together with the ancestors the events may write through
   `$child` (`runtime.core.joins.awaiting_ancestors`). `ProcessRepository` refuses a row
   locked after one with a greater id (`LockOrderError`). New process rows (`$start`,
   spawned children) are inserted afterwards; their ids are unique to the event that
   creates them.
2. **rows owned by those processes** — events, assignments, schedules, SLA marks,
   notifications, webhook deliveries, and for a registry its grants, keys, workflows and
   webhooks — only ever written while holding the owning process row, so they add no
   cycle.
3. **the global sequencer lock, last** (`pg_advisory_xact_lock(SEQUENCER_LOCK_KEY)` on
   PostgreSQL; SQLite's single writer already serialises), then the staged outbox rows are
   inserted (their ids, the subscription cursors, are allocated in commit order because
   the lock is held until COMMIT), then COMMIT.

The global lock is held only for step 3: a few inserts and the COMMIT, never while the
transaction waits for a row lock or runs application code. A transaction holding it waits
for nothing but its own statements, so it can never be part of a wait cycle.

On PostgreSQL the step and the COMMIT go in ONE request (`persistence/onetrip.py`,
issue 11): before, they were several awaited round trips, and on a CPU-starved node (the
15-minute soak) the transaction holding the global lock sat `idle in transaction` for up
to 2 s while its event loop ran other work, and every writer of every node waited behind
it. `sequence_and_commit` below is the SQLite path (one writer, no global lock).

The verifiable log (deployment-wide log index, Merkle append) belongs in `Sequencer.
sequence` too, next to the outbox insert: `events` lists this transaction's event rows in
the order they were written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, insert, text
from sqlalchemy.ext.asyncio import AsyncSession

from stateward.persistence.base import to_record
from stateward.persistence.models_ops import Outbox
from stateward.records import OutboxRecord, StoredEvent

if TYPE_CHECKING:
    from stateward.persistence.uow import UnitOfWork

#: Key of the PostgreSQL advisory lock of the sequencer step (formerly the outbox lock).
SEQUENCER_LOCK_KEY = 0x5354_4157_0002
_O = cast(Table, Outbox.__table__)
_INSERT_MANY = insert(_O).returning(*_O.c, sort_by_parameter_order=True)
_INSERT_IDS = insert(_O).returning(_O.c.id)
_LOCK = text("SELECT pg_advisory_xact_lock(:k)")
#: `session.info` flag: this transaction holds the sequencer lock (taken once).
LOCKED_INFO = "stateward.outbox_locked"


@dataclass
class StagedMessage:
    """An outbox row waiting for the sequencer step; `record` is set by it (id = cursor)."""

    params: dict[str, Any]
    record: OutboxRecord | None = field(default=None, repr=False)

    def assign(self, id_: int) -> None:
        """Record the row as inserted with outbox id `id_` (the sequencer step's answer)."""
        p = self.params
        self.record = OutboxRecord(
            id=id_,
            type=p["type"],
            payload=p["payload"],
            created_at=p["created_at"],
            namespace=p["namespace"],
            workflow=p["workflow"],
            instance_id=p["instance_id"],
            team=p["team"],
            published_at=None,
        )

    def sequenced(self) -> OutboxRecord:
        """The inserted row (only after the transaction went through the sequencer)."""
        if self.record is None:
            raise RuntimeError("outbox message not sequenced yet: commit the unit of work first")
        return self.record


class Sequencer:
    """Collects what a transaction must append in commit order, and appends it last."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.messages: list[StagedMessage] = []
        #: The event rows this transaction inserted, in order (for the verifiable log).
        self.events: list[StoredEvent] = []
        #: Runs of the sequencer step that took the global lock (tests and metrics).
        self.locked = 0

    def stage_message(
        self,
        type: str,
        payload: dict[str, Any],
        now: datetime,
        *,
        namespace: str | None = None,
        workflow: str | None = None,
        instance_id: str | None = None,
        team: str | None = None,
    ) -> StagedMessage:
        """Queue one bus message (DESIGN §9 payload without `id`) for the sequencer step."""
        staged = StagedMessage(
            {
                "type": type,
                "payload": payload,
                "created_at": now,
                "namespace": namespace,
                "workflow": workflow,
                "instance_id": instance_id,
                "team": team,
            }
        )
        self.messages.append(staged)
        return staged

    def record_event(self, event: StoredEvent) -> None:
        """Note an event row written by this transaction (called by `EventRepository`)."""
        self.events.append(event)

    def reset(self) -> None:
        """Forget everything staged (after a commit or a rollback)."""
        self.messages = []
        self.events = []

    async def sequence(self) -> None:
        """The sequencer step, just before COMMIT: take the global lock (PostgreSQL),
        append the staged outbox rows in staging order. Nothing to do, nothing locked."""
        if not self.messages and not self.events:
            return
        info = self.session.info
        if self.session.get_bind().dialect.name == "postgresql" and not info.get(LOCKED_INFO):
            await self.session.execute(_LOCK, {"k": SEQUENCER_LOCK_KEY})
            info[LOCKED_INFO] = True
            self.locked += 1
        if not self.messages:
            return
        if self.session.get_bind().dialect.name == "sqlite":
            await self._append_sqlite()
            return
        rows = (await self.session.execute(_INSERT_MANY, [m.params for m in self.messages])).all()
        for staged, row in zip(self.messages, rows, strict=True):
            staged.record = to_record(OutboxRecord, row)

    async def _append_sqlite(self) -> None:
        """The staged rows as ONE multi-row INSERT (a RETURNING in parameter order is one
        statement per row on SQLite: a thread round trip each). The writer holds the
        database's write lock (BEGIN IMMEDIATE), so the rows of one INSERT take
        increasing ids in VALUES order: the sorted ids are the staged rows' ids, in
        staging order. The records are built from what was sent, as on PostgreSQL
        (`onetrip`)."""
        params = [m.params for m in self.messages]
        ids = sorted(int(i) for i in (await self.session.execute(_INSERT_IDS, params)).scalars())
        for staged, id_ in zip(self.messages, ids, strict=True):
            staged.assign(id_)


async def sequence_and_commit(uow: UnitOfWork) -> None:
    """Run the sequencer step of `uow` — the global lock, the staged outbox rows, then
    the deployment log's append (`LogRepository.sequence`, under the same lock) — then
    COMMIT (what `UnitOfWork.commit` does)."""
    await uow.sequencer.sequence()
    await uow.log.sequence()
    await uow.session.commit()
