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
"""

from __future__ import annotations

import sqlite3
from collections import deque
from typing import Any

from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
)

#: Statements run through the one-hop cursor (tests).
stats = {"statements": 0}


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


def install(dbapi_connection: Any) -> None:
    """Give SQLAlchemy's adapted aiosqlite connection the one-hop cursor (its class is
    swapped for the subclass that only overrides `cursor`; anything else is left as is)."""
    if type(dbapi_connection) is AsyncAdapt_aiosqlite_connection:
        dbapi_connection.__class__ = OneHopConnection
