"""Deferred process updates and event inserts: a group-commit batch's rows in one go.

A group-commit batch applies many events in one transaction, and each wrote its process
row (UPDATE) and its event row (INSERT) as two statements; on SQLite each statement is a
round trip to aiosqlite's thread. With a `WriteBuffer` on the unit of work
(`UnitOfWork.buffer_writes()`, SQLite only) `ProcessRepository.update` and
`EventRepository.append` queue their rows instead, and the buffer sends them as ONE
`executemany` UPDATE (one per run of the same statement: an update that keeps the data
column is another) and ONE multi-row `INSERT … RETURNING id` just before any other
statement of the transaction and at commit. So nothing can ever read around a queued row:
every other statement, read or write, runs after the rows queued before it (a
`do_orm_execute` hook on the session), and the sequencer step runs after the flush. The
one exception is a statement marked `INDEPENDENT` (it touches neither table, e.g. the
claimed assignee read of an event in an assigned state): it runs at once.

What changes is only WHEN a queued row's failure shows: a lost seq (the UPDATE matched
fewer rows) or a unique conflict of an event row (duplicate, nonce, seq) surfaces at the
flush, where no single event can be blamed. The flush raises `BufferedWriteFailed`, and
the group committer rolls the batch back and applies it again without the buffer, where
each event's own statements answer for it (`runtime/core/group.py`). SQLite holds the
write lock from BEGIN IMMEDIATE, so a lost seq cannot happen there; a resubmitted
envelope inside a batch is the usual way to get here.

The ids of queued event rows are set on their `StoredEvent` objects (frozen dataclasses,
set once here) when the INSERT returns: nothing reads `id` before the commit's
sequencer step but the log's leaf queue and the sequencer, which run after the flush.
"""

from __future__ import annotations

from itertools import groupby
from operator import itemgetter
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import ORMExecuteState, Session

from stateward.records import StoredEvent

#: `session.info` key of the transaction's buffer (cleared with the rest at commit/rollback).
BUFFER_INFO = "stateward.write_buffer"
#: Execution option of a statement that neither reads nor writes `processes` or `events`
#: rows (nor anything keyed to an event row's id): it may run before the queued rows.
INDEPENDENT = "stateward_independent_of_buffer"
#: Flushes and the rows they sent (tests and the bench).
stats = {"flushes": 0, "updates": 0, "events": 0}


class BufferedWriteFailed(Exception):
    """A queued row was refused at the flush (see the module): apply the events again
    without the buffer, so that the refused one is found and answered alone."""


class WriteBuffer:
    """The queued rows of one transaction (see the module)."""

    def __init__(self, insert: Any) -> None:
        self._insert = insert
        #: (UPDATE statement, its parameters), in the order queued: an update that
        #: keeps the data column is another statement than one that writes it.
        self.updates: list[tuple[Any, dict[str, Any]]] = []
        self.events: list[tuple[StoredEvent, dict[str, Any]]] = []

    def __bool__(self) -> bool:
        return bool(self.updates or self.events)

    def flush(self, session: Session) -> None:
        """Send the queued rows (sync: inside the async session's greenlet)."""
        updates, self.updates = self.updates, []
        events, self.events = self.events, []
        try:
            # one executemany per run of the same statement, in queue order (a row's
            # later update expects the seq its earlier one wrote)
            for statement, run in groupby(updates, key=itemgetter(0)):
                params = [values for _, values in run]
                result = session.execute(statement, params)
                matched = result.rowcount  # type: ignore[attr-defined]
                if matched != len(params):
                    raise BufferedWriteFailed(
                        f"{len(params) - matched} of {len(params)} queued process updates "
                        "found their row at another seq"
                    )
            if events:
                rows = session.execute(self._insert, [values for _, values in events]).all()
                ids = {identity: int(id_) for identity, id_ in rows}
                for stored, _ in events:
                    object.__setattr__(stored, "id", ids[stored.identity])
        except IntegrityError as error:
            raise BufferedWriteFailed(f"a queued event row was refused: {error.orig}") from error
        stats["flushes"] += 1
        stats["updates"] += len(updates)
        stats["events"] += len(events)


def buffer_of(session: AsyncSession) -> WriteBuffer | None:
    """The transaction's buffer, or None (statements run at once)."""
    buffer = session.info.get(BUFFER_INFO)
    return buffer if isinstance(buffer, WriteBuffer) else None


def install(session: AsyncSession, buffer: WriteBuffer) -> None:
    """Queue this session's process updates and event inserts in `buffer` until the next
    other statement (or the commit's explicit flush)."""
    session.info[BUFFER_INFO] = buffer

    def before(state: ORMExecuteState) -> None:
        queued = state.session.info.get(BUFFER_INFO)
        if queued and not state.execution_options.get(INDEPENDENT):
            queued.flush(state.session)

    event.listen(session.sync_session, "do_orm_execute", before)


async def flush(session: AsyncSession) -> None:
    """Send what the session's buffer holds (before the sequencer step)."""
    buffer = buffer_of(session)
    if buffer:
        await session.run_sync(buffer.flush)
