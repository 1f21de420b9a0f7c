"""A SQLite statement through SQLAlchemy in ONE round trip to aiosqlite's thread.

aiosqlite runs every call on its connection's own thread and each `await` resumes only
when the event loop gets to it. SQLAlchemy's adapter cursor makes four such calls per
statement (`cursor`, `execute`, `fetchall`, `close`; three for one without rows and for
`executemany`), so a group-commit batch's `BEGIN IMMEDIATE` and its two reads at the
start were eleven hops, each waiting its turn behind the other requests' work on a busy
loop: ≈ 10 ms of a ≈ 55 ms batch (docs/performance.md, `batch18c`).

`install` gives a pooled connection (the engine's `connect` event, `db._tune_sqlite`)
a cursor whose `execute` and `executemany` run the same four steps as one function on the
driver's thread (`_statement`, `_statements`) and hand back what the adapter kept —
`description`, the rows (fetched at once, as the adapter does), `rowcount`, `lastrowid`.
Errors are the driver's own, raised from the same call and mapped by the adapter as
before. Server-side cursors (`stream_results`) keep SQLAlchemy's.

A transaction's `BEGIN` (`db._on_begin`) is not a call of its own either: `defer_begin`
leaves it on the aiosqlite connection (`DeferredBegin`), and the transaction's first
call on the driver's thread — a statement, the commit's tail (`tail.py`), the log's step —
runs it first, in the same round trip (`_begun`); a BEGIN that fails fails that call.
Nothing can run on the connection before it: every call goes through
`DeferredBegin._execute`. A COMMIT or ROLLBACK with the BEGIN still pending (nothing was
run: no transaction is open) sends nothing.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
)

#: Statements run through the one-hop cursor, BEGINs run with the call after them (tests).
stats = {"statements": 0, "deferred_begins": 0}
#: `DeferredBegin.__dict__` key of the BEGIN waiting for the transaction's first call.
_PENDING = "_stateward_begin"


def _statement(
    conn: sqlite3.Connection, operation: Any, parameters: Any
) -> tuple[Any, list[Any] | None, int | None, int]:
    """On the driver's thread: (description, rows or None, lastrowid, rowcount)."""
    cursor = conn.cursor()
    try:
        if parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        if cursor.description:
            return cursor.description, cursor.fetchall(), -1, -1
        return None, None, cursor.lastrowid, cursor.rowcount
    finally:
        cursor.close()


def _statements(conn: sqlite3.Connection, operation: Any, rows: Any) -> tuple[int | None, int]:
    """`executemany` on the driver's thread: (lastrowid, rowcount)."""
    cursor = conn.cursor()
    try:
        cursor.executemany(operation, rows)
        return cursor.lastrowid, cursor.rowcount
    finally:
        cursor.close()


class OneHopCursor(AsyncAdapt_aiosqlite_cursor):
    """SQLAlchemy's aiosqlite cursor, each statement in one driver call (see the module)."""

    __slots__ = ()

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        try:
            stats["statements"] += 1
            connection = self._connection
            description, rows, lastrowid, rowcount = self.await_(
                connection._execute(_statement, connection._conn, operation, parameters)
            )
            self.description = description
            self.lastrowid, self.rowcount = lastrowid, rowcount
            if rows is not None:
                self.lastrowid = self.rowcount = -1
                self._rows = deque(rows)
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Any:
        try:
            stats["statements"] += 1
            connection = self._connection
            lastrowid, rowcount = self.await_(
                connection._execute(_statements, connection._conn, operation, seq_of_parameters)
            )
            self.description = None
            self.lastrowid, self.rowcount = lastrowid, rowcount
        except Exception as error:
            self._adapt_connection._handle_exception(error)


class OneHopConnection(AsyncAdapt_aiosqlite_connection):
    """SQLAlchemy's adapted aiosqlite connection whose plain cursors are `OneHopCursor`s."""

    __slots__ = ()

    def cursor(self, server_side: bool = False) -> AsyncAdapt_aiosqlite_cursor:
        if server_side:
            return super().cursor(server_side=True)
        return OneHopCursor(self)


def _begun(conn: sqlite3.Connection, begin: str, call: Callable[[], Any]) -> Any:
    """On the driver's thread: the transaction's BEGIN, then its first call."""
    conn.execute(begin)
    return call()


class DeferredBegin(aiosqlite.Connection):
    """aiosqlite's connection whose pending BEGIN (`defer_begin`) runs with the next call
    on its thread (see the module)."""

    async def _execute(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        begin = self.__dict__.pop(_PENDING, None)
        if begin is None:
            return await super()._execute(fn, *args, **kwargs)
        stats["deferred_begins"] += 1
        return await super()._execute(_begun, self._conn, begin, partial(fn, *args, **kwargs))

    async def commit(self) -> None:
        if self.__dict__.pop(_PENDING, None) is None and self._open():
            await super().commit()

    async def rollback(self) -> None:
        if self.__dict__.pop(_PENDING, None) is None and self._open():
            await super().rollback()

    def _open(self) -> bool:
        """False when SQLite has no transaction open on this connection: the driver's
        COMMIT or ROLLBACK would then do nothing (`sqlite3` checks the same flag on its
        thread), so the round trip is not made. That is the pool's reset of every
        connection it gets back, after a COMMIT or a ROLLBACK already ended the
        transaction (`row18`). Read on the loop's thread: no call of this connection is
        running on the driver's thread while its owner commits or rolls back."""
        conn = self._connection
        return conn is None or conn.in_transaction  # closed: the driver says so


def install(dbapi_connection: Any) -> None:
    """Give SQLAlchemy's adapted aiosqlite connection the one-hop cursor and the deferred
    BEGIN (each class is swapped for a subclass that only overrides those methods)."""
    if type(dbapi_connection) is AsyncAdapt_aiosqlite_connection:
        dbapi_connection.__class__ = OneHopConnection
        if type(dbapi_connection._connection) is aiosqlite.Connection:
            dbapi_connection._connection.__class__ = DeferredBegin


def defer_begin(dbapi_connection: Any, begin: str) -> bool:
    """Leave `begin` for the connection's next call on the driver's thread (see the
    module); False when the connection cannot (then the caller sends it itself)."""
    driver = getattr(dbapi_connection, "_connection", None)
    if not isinstance(driver, DeferredBegin) or _PENDING in driver.__dict__:
        return False
    driver.__dict__[_PENDING] = begin
    return True
