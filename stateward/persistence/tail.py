"""The SQLite commit's tail in ONE round trip to the driver's thread (issue 18).

aiosqlite runs every call on its own thread and each `await` resumes only when the
event loop gets to it; through SQLAlchemy's adapter a statement costs three or four such
hops (cursor, execute, fetch, close). A group-commit batch used to end with about a
dozen: the write buffer's UPDATE executemany and INSERT … RETURNING, the outbox INSERT,
the log's head UPDATE and node INSERT, the COMMIT. On a busy loop each one waits its
turn, so the writer's wall time was its round trips (docs/performance.md, writer18b).

Here everything is bound on the event loop first (the write buffer's `Prepared` rows,
the outbox plan's rows, the log head this process wrote last), then ONE function runs on
aiosqlite's thread with the plain `sqlite3` connection: the buffered rows (their ids set
on the `StoredEvent`s), the outbox rows (ids in VALUES order: the writer holds the write
lock), the log step (`log.sqlite_step`) and COMMIT — as PostgreSQL does in one request
(`onetrip`). The statements and their checks are the same as on the multi-trip path; a
queued row refused still raises `BufferedWriteFailed` (the transaction stays open and is
rolled back by the unit of work), and nothing is answered before the COMMIT returned.

SQLAlchemy still holds the transaction as open: `session.commit()` afterwards closes it
without another round trip (`db.skip_driver_commit`, the COMMIT has been done). A unit of
work with ORM objects waiting for a flush keeps the multi-trip path (none of the write
path's repositories leave any: they write with Core statements).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from stateward.persistence import writebuffer
from stateward.persistence.db import SKIP_DRIVER_COMMIT
from stateward.persistence.log import _HEADS, PENDING, sqlite_step
from stateward.persistence.sequencer import _INSERT_IDS
from stateward.persistence.writebuffer import Prepared, _plan
from stateward.records import StoredEvent

if TYPE_CHECKING:
    from stateward.persistence.uow import UnitOfWork

#: Tails run in one round trip (tests and the bench).
stats = {"tails": 0}


def _run(
    conn: sqlite3.Connection,
    buffered: Prepared | None,
    outbox: list[tuple[str, tuple[Any, ...]]],
    pending: list[StoredEvent],
    guess: tuple[int, str] | None,
) -> tuple[list[int], tuple[int, int, str] | None]:
    """The tail, on the driver's thread: (outbox ids in staging order, log step)."""
    if buffered is not None:
        buffered.send(conn)
    ids: list[int] = []
    for sql, flat in outbox:
        ids.extend(sorted(int(row[0]) for row in conn.execute(sql, flat).fetchall()))
    step = sqlite_step(conn, pending, guess) if pending else None
    conn.commit()
    return ids, step


async def sequence_and_commit_sqlite(uow: UnitOfWork) -> bool:
    """Flush the write buffer, run the sequencer and log step and COMMIT `uow` in one
    round trip (see the module). False, with nothing done, when ORM objects wait for a
    flush (then the caller takes the multi-trip path)."""
    session = uow.session
    if session.new or session.dirty or session.deleted:
        return False
    buffer = writebuffer.take(session)
    messages = uow.sequencer.messages
    pending: list[StoredEvent] = session.info.pop(PENDING, None) or []
    if not buffer and not messages and not pending:
        await session.commit()
        return True
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    driver: Any = raw.driver_connection
    dialect = connection.dialect
    buffered = buffer.prepare(dialect) if buffer else None
    outbox: list[tuple[str, tuple[Any, ...]]] = []
    if messages:
        params = [m.params for m in messages]
        plan = _plan(_INSERT_IDS, tuple(params[0]), dialect)
        outbox = plan.chunks(plan.rows(params, {}))
    engine = session.get_bind()
    ids, step = await driver._execute(
        _run, driver._conn, buffered, outbox, pending, _HEADS.get(engine)
    )
    stats["tails"] += 1
    if step is not None:
        _HEADS[engine] = (step[1], step[2])
    for staged, id_ in zip(messages, ids, strict=True):
        staged.assign(id_)
    raw.info[SKIP_DRIVER_COMMIT] = True
    try:
        await session.commit()
    finally:
        raw.info.pop(SKIP_DRIVER_COMMIT, None)
    return True
