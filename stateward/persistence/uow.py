"""The unit of work: one AsyncSession, one transaction, every repository on it.

Whoever owns the transaction opens it (one event = one unit of work):

    async with uow_factory() as uow:
        process = await uow.processes.get(pid)
        ...
        await uow.commit()      # without this, leaving the block rolls back

A unit of work is used by ONE task at a time (never share it across concurrent tasks).
Read-only work passes `readonly=True`: on SQLite it starts with a plain deferred BEGIN
instead of `BEGIN IMMEDIATE`, so readers never wait for the write lock.
"""

from __future__ import annotations

from types import TracebackType

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from stateward.persistence.access import GrantRepository, KeyRepository, TokenRepository
from stateward.persistence.assignments import AssignmentRepository
from stateward.persistence.db import BEGIN_OPTION, session_factory
from stateward.persistence.errors import classify_integrity_error
from stateward.persistence.events import EventRepository
from stateward.persistence.log import LogRepository
from stateward.persistence.notify import NotificationRepository, WebhookRepository
from stateward.persistence.outbox import MetaRepository, OutboxRepository
from stateward.persistence.processes import ProcessRepository
from stateward.persistence.schedules import ScheduleRepository
from stateward.persistence.sweeps import SweepRepository
from stateward.persistence.workflows import ModuleRepository, WorkflowRepository


class UnitOfWork:
    """One transaction and the repositories that work inside it. Rolls back unless committed."""

    session: AsyncSession
    processes: ProcessRepository
    events: EventRepository
    sweeps: SweepRepository
    workflows: WorkflowRepository
    modules: ModuleRepository
    grants: GrantRepository
    keys: KeyRepository
    tokens: TokenRepository
    assignments: AssignmentRepository
    schedules: ScheduleRepository
    notifications: NotificationRepository
    webhooks: WebhookRepository
    outbox: OutboxRepository
    meta: MetaRepository
    log: LogRepository

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], *, readonly: bool = False
    ) -> None:
        self._sessions = sessions
        self.readonly = readonly
        self.committed = False

    async def __aenter__(self) -> UnitOfWork:
        self.session = session = self._sessions()
        self.committed = False
        if self.readonly and session.get_bind().dialect.name == "sqlite":
            await session.connection(execution_options={BEGIN_OPTION: "DEFERRED"})
        self.processes = ProcessRepository(session)
        self.events = EventRepository(session)
        self.sweeps = SweepRepository(session)
        self.workflows = WorkflowRepository(session)
        self.modules = ModuleRepository(session)
        self.grants = GrantRepository(session)
        self.keys = KeyRepository(session)
        self.tokens = TokenRepository(session)
        self.assignments = AssignmentRepository(session)
        self.schedules = ScheduleRepository(session)
        self.notifications = NotificationRepository(session)
        self.webhooks = WebhookRepository(session)
        self.outbox = OutboxRepository(session)
        self.meta = MetaRepository(session)
        self.log = LogRepository(session)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if not self.committed:
                await self.rollback()
        finally:
            await self.session.close()

    @property
    def dialect(self) -> str:
        """'sqlite' or 'postgresql'."""
        return self.session.get_bind().dialect.name

    async def commit(self) -> None:
        """Commit the transaction. Unique-constraint conflicts on events surface as
        `SeqConflict` / `NonceConflict` / `DuplicateEvent` (and nothing is committed).

        The sequencing step runs first: this transaction's events join the deployment
        log (`LogRepository.sequence`, under the global sequencing lock)."""
        try:
            await self.log.sequence()
            await self.session.commit()
        except IntegrityError as error:
            await self.session.rollback()
            conflict = classify_integrity_error(error)
            if conflict is None:
                raise
            raise conflict from error
        finally:
            self.session.info.clear()
        self.committed = True

    async def rollback(self) -> None:
        """Discard everything done in this unit of work."""
        await self.session.rollback()
        self.session.info.clear()


class UnitOfWorkFactory:
    """Makes units of work on one engine: `async with factory() as uow: ...`."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    @classmethod
    def from_engine(cls, engine: AsyncEngine) -> UnitOfWorkFactory:
        """A factory over `session_factory(engine)`."""
        return cls(session_factory(engine))

    def __call__(self, *, readonly: bool = False) -> UnitOfWork:
        """A new (not yet entered) unit of work."""
        return UnitOfWork(self.sessions, readonly=readonly)
