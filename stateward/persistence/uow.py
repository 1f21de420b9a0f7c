"""The unit of work: one AsyncSession, one transaction, every repository on it.

Whoever owns the transaction opens it (one event = one unit of work):

    async with uow_factory() as uow:
        process = await uow.processes.get(pid)
        ...
        await uow.commit()      # without this, leaving the block rolls back

A unit of work is used by ONE task at a time (never share it across concurrent tasks).
Read-only work passes `readonly=True`: on SQLite it starts with a plain deferred BEGIN
instead of `BEGIN IMMEDIATE`, so readers never wait for the write lock.

`commit` runs the sequencer step first (`persistence/sequencer.py`: the global lock taken
last, the staged outbox rows appended, then COMMIT): on PostgreSQL in one request
(`onetrip`), on SQLite in one round trip to the driver's thread (`tail`). On PostgreSQL
a writing unit of work bounds its waits (`DbTimeouts`: `lock_timeout`,
`idle_in_transaction_session_timeout`, `statement_timeout`, all `SET LOCAL`), so a
stalled peer costs others about a second. A unit of work left by a transient fault
(`is_transient`) or a cancellation discards its connection instead of returning it to
the pool in an unknown state.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from types import TracebackType

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from stateward.persistence import walcheck, writebuffer
from stateward.persistence.access import GrantRepository, KeyRepository, TokenRepository
from stateward.persistence.analytics import VisitRepository
from stateward.persistence.assignments import AssignmentRepository
from stateward.persistence.batches import BatchRepository
from stateward.persistence.db import BEGIN_OPTION, session_factory
from stateward.persistence.delegated import DelegatedTaskRepository
from stateward.persistence.errors import classify_integrity_error, is_transient
from stateward.persistence.events import INSERT_MANY as EVENTS_INSERT
from stateward.persistence.events import EventRepository
from stateward.persistence.incidents import IncidentRepository
from stateward.persistence.log import LogRepository
from stateward.persistence.messages import MessageRepository
from stateward.persistence.notify import NotificationRepository, WebhookRepository
from stateward.persistence.onetrip import sequence_and_commit_pg
from stateward.persistence.outbox import MetaRepository, OutboxRepository
from stateward.persistence.processes import DataCache, ProcessRepository
from stateward.persistence.schedules import ScheduleRepository
from stateward.persistence.search import (
    AssignmentSearchRepository,
    AuditRepository,
    CountRepository,
    SearchRepository,
)
from stateward.persistence.sequencer import Sequencer, sequence_and_commit
from stateward.persistence.sweeps import SweepRepository
from stateward.persistence.tail import sequence_and_commit_sqlite
from stateward.persistence.workflows import ModuleRepository, WorkflowRepository

log = logging.getLogger(__name__)
_SET_TIMEOUTS = text(
    "SELECT set_config('lock_timeout', :lock, true),"
    " set_config('idle_in_transaction_session_timeout', :idle, true),"
    " set_config('statement_timeout', :statement, true)"
)


@dataclass(frozen=True)
class DbTimeouts:
    """Bounds of a writing transaction on PostgreSQL, in milliseconds (0 = no bound).

    `lock_ms`: longest wait for a row or advisory lock (then SQLSTATE 55P03, retried).
    `idle_ms`: a transaction idle that long (its node paused, stuck or dead) is ended by
    the server, releasing its locks. `statement_ms`: longest single statement.
    """

    lock_ms: int = 1000
    idle_ms: int = 1000
    statement_ms: int = 30_000


class UnitOfWork:
    """One transaction and the repositories that work inside it. Rolls back unless committed."""

    session: AsyncSession
    processes: ProcessRepository
    search: SearchRepository
    counts: CountRepository
    audit: AuditRepository
    task_search: AssignmentSearchRepository
    events: EventRepository
    sweeps: SweepRepository
    workflows: WorkflowRepository
    modules: ModuleRepository
    grants: GrantRepository
    keys: KeyRepository
    tokens: TokenRepository
    assignments: AssignmentRepository
    schedules: ScheduleRepository
    messages: MessageRepository
    batches: BatchRepository
    incidents: IncidentRepository
    notifications: NotificationRepository
    webhooks: WebhookRepository
    delegated: DelegatedTaskRepository
    outbox: OutboxRepository
    meta: MetaRepository
    log: LogRepository
    visits: VisitRepository
    sequencer: Sequencer

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        readonly: bool = False,
        timeouts: DbTimeouts | None = None,
        data_cache: DataCache | None = None,
    ) -> None:
        self._sessions = sessions
        self.readonly = readonly
        self.timeouts = timeouts or DbTimeouts()
        self.data_cache = data_cache
        self.committed = False

    async def __aenter__(self) -> UnitOfWork:
        self.session = session = self._sessions()
        self.committed = False
        self.sequencer = Sequencer(session)
        dialect = session.get_bind().dialect.name
        if self.readonly and dialect == "sqlite":
            await session.connection(execution_options={BEGIN_OPTION: "DEFERRED"})
        elif not self.readonly and dialect == "postgresql":
            t = self.timeouts
            try:
                await session.execute(
                    _SET_TIMEOUTS,
                    {
                        "lock": str(t.lock_ms),
                        "idle": str(t.idle_ms),
                        "statement": str(t.statement_ms),
                    },
                )
            except BaseException:
                await self._discard()
                await session.close()
                raise
        self.processes = ProcessRepository(session, self.data_cache)
        self.search = SearchRepository(session)
        self.counts = CountRepository(session)
        self.audit = AuditRepository(session)
        self.task_search = AssignmentSearchRepository(session)
        self.events = EventRepository(session, self.sequencer)
        self.sweeps = SweepRepository(session)
        self.workflows = WorkflowRepository(session)
        self.modules = ModuleRepository(session)
        self.grants = GrantRepository(session)
        self.keys = KeyRepository(session)
        self.tokens = TokenRepository(session)
        self.assignments = AssignmentRepository(session)
        self.schedules = ScheduleRepository(session)
        self.messages = MessageRepository(session)
        self.batches = BatchRepository(session)
        self.incidents = IncidentRepository(session)
        self.notifications = NotificationRepository(session)
        self.webhooks = WebhookRepository(session)
        self.delegated = DelegatedTaskRepository(session)
        self.outbox = OutboxRepository(session, self.sequencer)
        self.meta = MetaRepository(session)
        self.log = LogRepository(session)
        self.visits = VisitRepository(session)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self.committed:
                return
            if exc is not None and (not isinstance(exc, Exception) or is_transient(exc)):
                await self._discard()  # dead, killed or cancelled mid-statement: drop it
                return
            try:
                await self.rollback()
            except Exception as error:
                if not is_transient(error):
                    raise
                await self._discard()
        finally:
            await self.session.close()

    async def _discard(self) -> None:
        """Invalidate the connection (closed, never reused) and forget staged work."""
        self.sequencer.reset()
        self.session.info.clear()
        with contextlib.suppress(Exception):
            await self.session.invalidate()

    @property
    def dialect(self) -> str:
        """'sqlite' or 'postgresql'."""
        return self.session.get_bind().dialect.name

    def buffer_writes(self) -> bool:
        """Queue this transaction's process updates and event inserts and send them
        together (`persistence/writebuffer.py`; SQLite, where each statement is a thread
        round trip). True when on; a queued row refused at the flush raises
        `BufferedWriteFailed`."""
        if self.dialect != "sqlite":
            return False
        writebuffer.install(self.session, writebuffer.WriteBuffer(EVENTS_INSERT))
        return True

    async def commit(self) -> None:
        """The sequencer step (global lock last, outbox rows appended), then COMMIT.
        Unique-constraint conflicts on events surface as `SeqConflict` / `NonceConflict`
        (and nothing is committed)."""
        try:
            if self.dialect == "postgresql":
                await writebuffer.flush(self.session)
                await sequence_and_commit_pg(self)
            elif not await sequence_and_commit_sqlite(self):
                await writebuffer.flush(self.session)
                await sequence_and_commit(self)
        except IntegrityError as error:
            await self.session.rollback()
            conflict = classify_integrity_error(error)
            if conflict is None:
                raise
            raise conflict from error
        finally:
            self.session.info.clear()
            self.sequencer.reset()
        self.committed = True
        self.processes.committed()  # the rows' data as committed (`DataCache`)
        if not self.readonly and self.dialect == "sqlite":
            walcheck.after_commit(self.session.get_bind())  # type: ignore[arg-type]

    async def rollback(self) -> None:
        """Discard everything done in this unit of work."""
        self.sequencer.reset()
        self.session.info.clear()
        await self.session.rollback()


class UnitOfWorkFactory:
    """Makes units of work on one engine: `async with factory() as uow: ...`."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], timeouts: DbTimeouts | None = None
    ) -> None:
        self.sessions = sessions
        self.timeouts = timeouts or DbTimeouts()
        #: Instance data of committed rows, shared by this factory's units of work.
        self.data_cache = DataCache()

    @classmethod
    def from_engine(
        cls, engine: AsyncEngine, timeouts: DbTimeouts | None = None
    ) -> UnitOfWorkFactory:
        """A factory over `session_factory(engine)`."""
        return cls(session_factory(engine), timeouts)

    def __call__(self, *, readonly: bool = False) -> UnitOfWork:
        """A new (not yet entered) unit of work."""
        return UnitOfWork(
            self.sessions, readonly=readonly, timeouts=self.timeouts, data_cache=self.data_cache
        )
