"""SQLite's WAL checkpoints off the writer's path (issue 18, `batch18c`).

In WAL mode a commit appends the transaction's pages to the `-wal` file; a checkpoint
copies them back into the database file (and, unless `synchronous=OFF`, fsyncs both).
SQLite runs one inside the COMMIT of whichever connection pushes the WAL past
`wal_autocheckpoint` pages (1,000 by default). A group-commit batch of 200 events writes
about 500 pages, so every other batch's COMMIT also did the checkpoint: ≈ 4 ms of copying
plus the fsyncs on the driver's thread, while the writer — and every caller of the
batch — waited (docs/performance.md, `batch18c`).

Here a write commit (`UnitOfWork.commit`, SQLite) calls `after_commit`, which starts a
`PRAGMA wal_checkpoint(PASSIVE)` on a worker thread of the loop's default executor, with
a connection of its own, when none is running and `INTERVAL` seconds have passed since
the last one started. PASSIVE never blocks writers or readers (it copies what no reader
still needs; the next writer restarts the WAL once it has all been copied). The engine's
own connections keep an automatic checkpoint only as a safety net, at `SAFETY_PAGES`
(`db._tune_sqlite`): the WAL stays bounded even when nothing calls `after_commit`
(alembic, a process that ends first). Durability is unchanged: a commit's own syncs
(`synchronous=full`: the WAL at every COMMIT) are SQLite's as before; a checkpoint only
moves committed pages.

The checkpoint's connection is opened `mode=rw` (it never creates a file: a database
deleted meanwhile, e.g. a test's temporary folder, is skipped) and closed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
import weakref
from typing import Any
from urllib.parse import quote

from sqlalchemy.engine import Engine

from stateward.persistence.db import SQLITE_WAL_SAFETY_PAGES, sqlite_file

log = logging.getLogger(__name__)
#: Seconds between the starts of two background checkpoints (at most one runs at a time).
INTERVAL = 0.5
#: `PRAGMA wal_autocheckpoint` of the engine's connections (`db._tune_sqlite`): a COMMIT
#: checkpoints itself only when the WAL has grown past this many pages.
SAFETY_PAGES = SQLITE_WAL_SAFETY_PAGES
#: Background checkpoints started and their answers (tests and the bench).
stats = {"started": 0, "done": 0, "frames": 0}


class _State:
    __slots__ = ("last", "path", "running")

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.running = False
        self.last = float("-inf")


_STATES: weakref.WeakKeyDictionary[Any, _State] = weakref.WeakKeyDictionary()


def database_file(engine: Engine) -> str | None:
    """The engine's SQLite database file, or None (another backend, `:memory:`)."""
    path = sqlite_file(engine.url)
    if path is None or str(path).startswith("file:"):  # a URI database: not opened again
        return None
    return str(path.resolve())


def after_commit(engine: Engine) -> None:
    """A write transaction of `engine` (the session's sync engine) committed, on the event
    loop: start a background PASSIVE checkpoint when none runs and `INTERVAL` has passed
    since the last start."""
    state = _STATES.get(engine)
    if state is None:
        state = _STATES[engine] = _State(database_file(engine))
    if state.path is None or state.running:
        return
    now = time.monotonic()
    if now - state.last < INTERVAL:
        return
    state.running, state.last = True, now
    stats["started"] += 1
    try:
        future = asyncio.get_running_loop().run_in_executor(None, checkpoint, state.path)
    except RuntimeError:  # no running loop or its executor is shut down: SQLite's own
        state.running = False
        return
    future.add_done_callback(lambda done: _finished(state, done))


def _finished(state: _State, done: asyncio.Future[tuple[int, int, int] | None]) -> None:
    state.running = False
    with contextlib.suppress(BaseException):
        answer = done.result()
        if answer is not None:
            stats["done"] += 1
            stats["frames"] += max(answer[2], 0)


def checkpoint(path: str) -> tuple[int, int, int] | None:
    """`PRAGMA wal_checkpoint(PASSIVE)` on a connection of its own (any thread): SQLite's
    (busy, frames in the WAL, frames checkpointed), or None when the file is gone or the
    database could not be opened."""
    try:
        conn = sqlite3.connect(
            f"file:{quote(path)}?mode=rw", uri=True, isolation_level=None,
            check_same_thread=False,
        )  # fmt: skip
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return None if row is None else (int(row[0]), int(row[1]), int(row[2]))
    except sqlite3.Error as error:
        log.debug("background WAL checkpoint of %s: %s", path, error)
        return None
    finally:
        conn.close()
