"""Deferred process updates and event inserts: a group-commit batch's rows in one go.

A group-commit batch applies many events in one transaction, and each wrote its process
row (UPDATE) and its event row (INSERT) as two statements; on SQLite each statement is a
round trip to aiosqlite's thread. With a `WriteBuffer` on the unit of work
(`UnitOfWork.buffer_writes()`, SQLite only) `ProcessRepository.update` and
`EventRepository.append` queue their rows instead, and the buffer sends them as ONE
`executemany` UPDATE of the process rows, ONE of the data rows the batch changed (each
one's last value: `latest`) and ONE multi-row `INSERT … RETURNING id` just before any
other statement of the transaction and at commit. So nothing can ever read around a queued row:
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

import sqlite3
from collections.abc import Callable, Iterable
from itertools import groupby
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, event
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import ORMExecuteState, Session

from stateward.persistence.types import UTCDateTime
from stateward.records import StoredEvent

#: `session.info` key of the transaction's buffer (cleared with the rest at commit/rollback).
BUFFER_INFO = "stateward.write_buffer"
#: Execution option of a statement that neither reads nor writes `processes` or `events`
#: rows (nor anything keyed to an event row's id): it may run before the queued rows.
INDEPENDENT = "stateward_independent_of_buffer"
#: Flushes and the rows they sent (tests and the bench).
stats = {"flushes": 0, "updates": 0, "events": 0, "update_rows": 0}


class BufferedWriteFailed(Exception):
    """A queued row was refused at the flush (see the module): apply the events again
    without the buffer, so that the refused one is found and answered alone."""


class AlreadyStored(BufferedWriteFailed):
    """Queued events whose envelope (identity) or (actor, nonce) the log holds already,
    found before anything was sent (`refuse_stored`): apply the batch again without
    them, still buffered, and answer them as resubmissions. Without this check each such
    event cost the whole batch a run without the buffer and another without the event:
    a `submitEvents` of 100 envelopes of which 10 were sent before ran ≈ 25 times slower
    (docs/performance.md, `dup18`)."""

    def __init__(self, identities: frozenset[str]) -> None:
        super().__init__(f"{len(identities)} queued events are stored already")
        self.identities = identities


#: Envelopes looked up per statement of `refuse_stored` (two variables each at most).
_LOOKUP_CHUNK = 400


#: What identifies a stored event for `refuse_stored`: (identity, actor, nonce).
EventKey = tuple[str, str, str]


def refuse_stored(events: list[StoredEvent], run: Callable[[str, tuple[Any, ...]], Any]) -> None:
    """Raise `AlreadyStored` for those of `events` the log holds already (by identity or
    by (actor, nonce)); `run(sql, params)` gives a statement's rows on the caller's
    connection (SQLAlchemy's inside the greenlet, or the plain `sqlite3` one)."""
    keys = [(e.identity, e.actor, e.nonce) for e in events]
    rows = [row for sql, params in already_stored_sql(keys) for row in run(sql, params)]
    if rows:
        raise AlreadyStored(matching(keys, rows))


def already_stored_sql(keys: list[EventKey]) -> list[tuple[str, tuple[Any, ...]]]:
    """SQLite statements (qmark) finding the stored events that share an (actor, nonce)
    with `keys` (the same envelope has the same pair): rows (identity, actor, nonce),
    through the unique (actor, nonce) index of `events` (PostgreSQL:
    `EventRepository.stored_keys`)."""
    out: list[tuple[str, tuple[Any, ...]]] = []
    for start in range(0, len(keys), _LOOKUP_CHUNK):
        chunk = keys[start : start + _LOOKUP_CHUNK]
        parts: list[str] = []
        params: list[Any] = []
        for actor, nonces in nonces_by_actor((a, n) for _, a, n in chunk).items():
            parts.append(
                "SELECT identity, actor, nonce FROM events WHERE actor = ? AND nonce IN "
                f"({', '.join('?' * len(nonces))})"
            )
            params += [actor, *nonces]
        out.append((" UNION ALL ".join(parts), tuple(params)))
    return out


def nonces_by_actor(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """The nonces of (actor, nonce) `pairs`, grouped by actor (one index range each)."""
    by_actor: dict[str, list[str]] = {}
    for actor, nonce in pairs:
        by_actor.setdefault(actor, []).append(nonce)
    return by_actor


def matching(keys: list[EventKey], rows: Any) -> frozenset[str]:
    """The identities among `keys` that the stored `rows` (identity, actor, nonce)
    answer: the same envelope, or another one with the same (actor, nonce)."""
    rows = list(rows)
    identities = {row[0] for row in rows}
    pairs = {(row[1], row[2]) for row in rows}
    return frozenset(
        identity
        for identity, actor, nonce in keys
        if identity in identities or (actor, nonce) in pairs
    )


class WriteBuffer:
    """The queued rows of one transaction (see the module)."""

    def __init__(self, insert: Any) -> None:
        self._insert = insert
        #: (UPDATE statement, its parameters) of process rows, in the order queued.
        self.updates: list[tuple[Any, dict[str, Any]]] = []
        #: (UPDATE statement, row key) -> its parameters: rows only the last write of
        #: which matters (a process's data: each event's replaces the one before).
        self.latest: dict[tuple[Any, Any], dict[str, Any]] = {}
        self.events: list[tuple[StoredEvent, dict[str, Any]]] = []

    def __bool__(self) -> bool:
        return bool(self.updates or self.latest or self.events)

    def _take_updates(self) -> list[tuple[Any, dict[str, Any]]]:
        """The queued updates to send, in order: the process rows (`coalesced`), then
        the last write of each `latest` row (emptied here)."""
        queued, self.updates = self.updates, []
        latest, self.latest = self.latest, {}
        return coalesced(queued) + [(key[0], values) for key, values in latest.items()]

    def flush(self, session: Session) -> None:
        """Send the queued rows (sync: inside the async session's greenlet)."""
        queued = len(self.updates)
        updates = self._take_updates()
        events, self.events = self.events, []
        connection = session.connection()
        dialect = connection.dialect
        memo: dict[Any, Any] = {}  # bound forms of the batch's repeated instants
        refuse_stored(
            [e for e, _ in events], lambda sql, p: connection.exec_driver_sql(sql, p).all()
        )
        try:
            # one executemany per run of the same statement, in queue order
            for statement, run in groupby(updates, key=itemgetter(0)):
                params = [values for _, values in run]
                plan = _plan(statement, tuple(params[0]), dialect)
                result = connection.exec_driver_sql(plan.sql, plan.rows(params, memo))
                matched = result.rowcount
                if matched != len(params):
                    raise BufferedWriteFailed(
                        f"{len(params) - matched} of {len(params)} queued updates did not "
                        "find their row (a process row at another seq)"
                    )
            if events:
                ids = self._insert_events([values for _, values in events], connection, memo)
                for stored, _ in events:
                    object.__setattr__(stored, "id", ids[stored.identity])
        except IntegrityError as error:
            raise BufferedWriteFailed(f"a queued event row was refused: {error.orig}") from error
        stats["flushes"] += 1
        stats["updates"] += queued
        stats["update_rows"] += len(updates)
        stats["events"] += len(events)

    def prepare(self, dialect: Dialect) -> Prepared:
        """Take the queued rows, bound for the driver (on the event loop), to be sent by
        `Prepared.send` on the driver's own thread (`persistence/tail.py`: the SQLite
        commit's one round trip)."""
        queued = len(self.updates)
        updates = self._take_updates()
        events, self.events = self.events, []
        memo: dict[Any, Any] = {}
        prepared = Prepared([stored for stored, _ in events])
        prepared.queued = queued
        for statement, run in groupby(updates, key=itemgetter(0)):
            params = [values for _, values in run]
            plan = _plan(statement, tuple(params[0]), dialect)
            prepared.updates.append((plan.sql, plan.rows(params, memo)))
        if events:
            values = [v for _, v in events]
            plan = _plan(self._insert, tuple(values[0]), dialect)
            prepared.inserts.extend(plan.chunks(plan.rows(values, memo)))
        return prepared

    def _insert_events(
        self, values: list[dict[str, Any]], connection: Connection, memo: dict[Any, Any]
    ) -> dict[str, int]:
        """The event rows in multi-row INSERTs (as many rows per statement as SQLite's
        variable limit allows); {identity: id}."""
        plan = _plan(self._insert, tuple(values[0]), connection.dialect)
        ids: dict[str, int] = {}
        for sql, flat in plan.chunks(plan.rows(values, memo)):
            for identity, id_ in connection.exec_driver_sql(sql, flat).all():
                ids[identity] = int(id_)
        return ids


class Prepared:
    """A buffer's rows bound for the driver: `send` them through a plain `sqlite3`
    connection (on aiosqlite's thread), with the same checks as `WriteBuffer.flush`."""

    def __init__(self, stored: list[StoredEvent]) -> None:
        self.stored = stored
        #: (UPDATE sql, bound rows), one executemany each, in queue order
        self.updates: list[tuple[str, list[tuple[Any, ...]]]] = []
        #: (multi-row INSERT … RETURNING identity, id sql, flat parameters)
        self.inserts: list[tuple[str, tuple[Any, ...]]] = []
        #: process updates queued (before `coalesced`)
        self.queued = 0

    def send(self, conn: sqlite3.Connection) -> None:
        """Run the statements (sync, on the driver's thread; the transaction is open)
        and set each queued event's id. A refused row raises `BufferedWriteFailed`;
        events stored already raise `AlreadyStored` before anything is sent."""
        refuse_stored(self.stored, lambda sql, params: conn.execute(sql, params).fetchall())
        try:
            for sql, rows in self.updates:
                matched = conn.executemany(sql, rows).rowcount
                if matched != len(rows):
                    raise BufferedWriteFailed(
                        f"{len(rows) - matched} of {len(rows)} queued updates did not "
                        "find their row (a process row at another seq)"
                    )
            ids: dict[str, int] = {}
            for sql, flat in self.inserts:
                for identity, id_ in conn.execute(sql, flat).fetchall():
                    ids[identity] = int(id_)
        except sqlite3.IntegrityError as error:
            raise BufferedWriteFailed(f"a queued event row was refused: {error}") from error
        for stored in self.stored:
            object.__setattr__(stored, "id", ids[stored.identity])
        stats["flushes"] += 1
        stats["updates"] += self.queued
        stats["update_rows"] += sum(len(rows) for _, rows in self.updates)
        stats["events"] += len(self.stored)


def coalesced(updates: list[tuple[Any, dict[str, Any]]]) -> list[tuple[Any, dict[str, Any]]]:
    """The queued process updates, one per process: a batch with several events of one
    process queued one full-row UPDATE per event, each expecting the seq the one before
    it wrote; inside the transaction only the last one's values survive. So each chain
    becomes ONE update: the last one's values and the first one's expected seq (the
    row's seq before the batch, so a lost seq is still found). In the order of
    each process's first update. A chain that is not one (an update not expecting the
    seq the one before it wrote) leaves every update as queued, so the flush refuses
    them exactly as before."""
    chains: dict[Any, list[tuple[Any, dict[str, Any]]]] = {}
    for entry in updates:
        chain = chains.setdefault(entry[1]["_id"], [])
        if chain and entry[1]["_expected_seq"] != chain[-1][1]["seq"]:
            return updates
        chain.append(entry)
    if len(chains) == len(updates):
        return updates
    out: list[tuple[Any, dict[str, Any]]] = []
    for chain in chains.values():
        if len(chain) == 1:
            out.append(chain[0])
            continue
        statement, last = chain[-1]
        out.append((statement, dict(last, _expected_seq=chain[0][1]["_expected_seq"])))
    return out


#: Bound variables per statement: SQLite's limit since 3.32 (999 before).
_MAX_VARIABLES = 32766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999


class _Plan:
    """A buffered statement compiled once for the dialect: its SQL (positional), the
    parameter names in order and each one's bind processor, so a batch's parameters are
    bound here in one plain loop (the same processors SQLAlchemy would run per row, the
    batch's repeated instants bound once) and sent with `exec_driver_sql`."""

    def __init__(self, statement: Any, keys: tuple[str, ...], dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))
        self.sql: str = compiled.string
        self.names: tuple[str, ...] = tuple(compiled.positiontup or ())
        processors = compiled._bind_processors
        self.processors = tuple(processors.get(name) for name in self.names)
        #: positions of the datetime parameters (memoised per flush)
        self.instants = frozenset(
            n for n, name in enumerate(self.names)
            if isinstance(compiled.binds[name].type, UTCDateTime)
        )  # fmt: skip
        head, values, tail = _split_values(self.sql)
        self._head, self._values, self._tail = head, values, tail

    def rows(self, params: list[dict[str, Any]], memo: dict[Any, Any]) -> list[tuple[Any, ...]]:
        """Each parameter dict as a tuple of bound values, in the SQL's order."""
        steps = [
            (name, processor, n in self.instants)
            for n, (name, processor) in enumerate(zip(self.names, self.processors, strict=True))
        ]
        out = []
        for values in params:
            row = []
            for name, processor, instant in steps:
                value = values[name]
                if processor is not None:  # on None too, as SQLAlchemy (JSON: 'null')
                    if instant:
                        bound = memo.get(value, _MISSING)
                        if bound is _MISSING:
                            bound = memo[value] = processor(value)
                        value = bound
                    else:
                        value = processor(value)
                row.append(value)
            out.append(tuple(row))
        return out

    def many(self, count: int) -> str:
        """The INSERT with `count` rows of VALUES."""
        return self._head + ", ".join([self._values] * count) + self._tail

    def chunks(self, rows: list[tuple[Any, ...]]) -> list[tuple[str, tuple[Any, ...]]]:
        """An INSERT's bound rows as multi-row statements, as many rows each as SQLite's
        variable limit allows: [(sql, flat parameters)]."""
        per = max(1, _MAX_VARIABLES // len(self.names))
        out = []
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            out.append((self.many(len(chunk)), tuple(value for row in chunk for value in row)))
        return out


_MISSING = object()
_PLANS: dict[tuple[int, tuple[str, ...], str], _Plan] = {}


def _plan(statement: Any, keys: tuple[str, ...], dialect: Dialect) -> _Plan:
    """The statement's `_Plan` for these parameter names (built once per process)."""
    key = (id(statement), keys, dialect.name)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _Plan(statement, keys, dialect)
    return plan


def _split_values(sql: str) -> tuple[str, str, str]:
    """An INSERT's SQL cut around its one row of VALUES (head, `(?, …)`, tail); an
    UPDATE's comes back as (sql, "", "")."""
    marker = " VALUES ("
    at = sql.find(marker)
    if not sql.startswith("INSERT") or at < 0:
        return sql, "", ""
    end = sql.index(")", at + len(marker))
    return sql[: at + len(" VALUES ")], sql[at + len(" VALUES ") : end + 1], sql[end + 1 :]


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


def take(session: AsyncSession) -> WriteBuffer | None:
    """Remove the transaction's buffer (its rows are about to be sent another way: the
    do_orm_execute hook finds nothing to flush afterwards)."""
    buffer = session.info.pop(BUFFER_INFO, None)
    return buffer if isinstance(buffer, WriteBuffer) else None


async def flush(session: AsyncSession) -> None:
    """Send what the session's buffer holds (before the sequencer step)."""
    buffer = buffer_of(session)
    if buffer:
        await session.run_sync(buffer.flush)
