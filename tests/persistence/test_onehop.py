"""SQLite statements through SQLAlchemy in one round trip to aiosqlite's thread
(`persistence/onehop.py`): the same rows, counts, ids and errors as SQLAlchemy's own
adapter cursor, one driver call per statement instead of three or four."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from stateward.persistence import create_engine, onehop
from stateward.persistence.db import session_factory
from stateward.persistence.uow import UnitOfWork


async def test_each_statement_is_one_driver_call(
    sqlite_engine: AsyncEngine, driver_hops: list[str]
) -> None:
    async with sqlite_engine.begin() as conn:
        await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)"))
    async with sqlite_engine.connect() as conn:
        await conn.execute(text("SELECT 1"))  # the pooled connection at hand
        await conn.rollback()
        driver_hops.clear()
        await conn.begin()  # BEGIN IMMEDIATE (the `begin` hook) waits for the statement
        assert driver_hops == []
        await conn.execute(text("SELECT 1"))
        assert driver_hops == ["_begun"]  # BEGIN, then the SELECT in one call
        driver_hops.clear()
        one = await conn.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": "a"})
        assert driver_hops == ["_statement"] and one.rowcount == 1 and one.lastrowid == 1
        driver_hops.clear()
        many = await conn.execute(text("INSERT INTO t (v) VALUES (:v)"), [{"v": "b"}, {"v": "c"}])
        assert driver_hops == ["_statements"] and many.rowcount == 2
        driver_hops.clear()
        rows = (await conn.execute(text("SELECT id, v FROM t ORDER BY id"))).all()
        assert driver_hops == ["_statement"]
        assert [tuple(r) for r in rows] == [(1, "a"), (2, "b"), (3, "c")]
        returned = await conn.execute(text("UPDATE t SET v = v || '!' WHERE id > 1 RETURNING id"))
        assert sorted(r[0] for r in returned) == [2, 3]
        updated = await conn.execute(text("UPDATE t SET v = 'z' WHERE id = 1"))
        assert updated.rowcount == 1
        await conn.commit()
    assert onehop.stats["statements"] > 0


async def test_driver_errors_are_mapped_as_before(sqlite_engine: AsyncEngine) -> None:
    async with sqlite_engine.begin() as conn:
        await conn.execute(text("CREATE TABLE u (v TEXT UNIQUE)"))
        await conn.execute(text("INSERT INTO u (v) VALUES ('x')"))
    async with sqlite_engine.connect() as conn:
        with pytest.raises(IntegrityError):
            await conn.execute(text("INSERT INTO u (v) VALUES ('x')"))
        await conn.rollback()
        with pytest.raises(OperationalError):
            await conn.execute(text("SELECT * FROM no_such_table"))
        with pytest.raises(IntegrityError):
            await conn.execute(text("INSERT INTO u (v) VALUES (:v)"), [{"v": "y"}, {"v": "y"}])


async def test_streamed_results_keep_the_server_side_cursor(sqlite_engine: AsyncEngine) -> None:
    async with sqlite_engine.connect() as conn:
        result = await conn.stream(text("SELECT 1 UNION ALL SELECT 2"))
        assert [row[0] async for row in result] == [1, 2]


async def test_a_deferred_begin_takes_the_write_lock_with_the_first_statement(
    sqlite_engine: AsyncEngine, driver_hops: list[str]
) -> None:
    """`BEGIN IMMEDIATE` runs on the driver's thread right before the transaction's
    first statement (`onehop.defer_begin`): that statement already runs inside it, with
    the write lock held; a transaction that ran nothing sends no COMMIT or ROLLBACK."""
    import sqlite3

    path = sqlite_engine.url.database
    assert path is not None
    before = onehop.stats["deferred_begins"]
    async with sqlite_engine.connect() as conn:
        await conn.begin()
        await conn.execute(text("SELECT 1"))
        other = sqlite3.connect(path, timeout=0)
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        finally:
            other.close()
        await conn.rollback()
        driver_hops.clear()
        await conn.begin()
        await conn.commit()
        await conn.begin()
        await conn.rollback()
        assert driver_hops == []  # nothing begun, nothing to end
    assert onehop.stats["deferred_begins"] == before + 1


async def test_the_stock_driver_path_stays_available(
    sqlite_db_url: str, driver_hops: list[str]
) -> None:
    """`create_engine(..., sqlite_one_hop=False)` (the benches' bare baseline) keeps
    SQLAlchemy's own cursor — several driver calls per statement — and sends its
    `BEGIN IMMEDIATE` at once, with the same PRAGMAs."""
    eng = create_engine(sqlite_db_url, sqlite_one_hop=False)
    try:
        async with eng.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY)"))
        async with eng.connect() as conn:
            await conn.execute(text("SELECT 1"))
            await conn.rollback()
            raw = (await conn.get_raw_connection()).dbapi_connection
            assert type(raw) is not onehop.OneHopConnection
            driver_hops.clear()
            await conn.begin()
            assert len(driver_hops) == 3  # BEGIN IMMEDIATE sent now, through the stock cursor
            driver_hops.clear()
            await conn.execute(text("INSERT INTO t DEFAULT VALUES"))
            assert len(driver_hops) >= 3 and "_statement" not in driver_hops
            mode = (await conn.execute(text("PRAGMA journal_mode"))).scalar_one()
            assert mode == "wal"
            await conn.commit()
    finally:
        await eng.dispose()


async def test_a_connection_with_no_transaction_open_is_not_rolled_back_again(
    sqlite_engine: AsyncEngine, driver_hops: list[str]
) -> None:
    """The pool's reset of a connection handed back after COMMIT or ROLLBACK makes no
    round trip; a ROLLBACK of an open transaction still makes one and undoes it."""
    sessions = session_factory(sqlite_engine)
    async with sqlite_engine.begin() as conn:
        await conn.execute(text("CREATE TABLE r (v TEXT)"))
    async with UnitOfWork(sessions, readonly=True) as uow:  # warm the pool
        await uow.session.execute(text("SELECT 1"))
    driver_hops.clear()
    async with UnitOfWork(sessions, readonly=True) as uow:
        await uow.session.execute(text("SELECT v FROM r"))
    assert driver_hops == ["_begun", "rollback"]  # was: a second ROLLBACK at check-in
    driver_hops.clear()
    async with UnitOfWork(sessions) as uow:
        await uow.session.execute(text("INSERT INTO r (v) VALUES ('kept')"))
        await uow.commit()
    assert driver_hops == ["_begun", "commit"]  # was: a ROLLBACK after the COMMIT
    driver_hops.clear()
    async with UnitOfWork(sessions) as uow:  # left without commit: rolled back
        await uow.session.execute(text("INSERT INTO r (v) VALUES ('undone')"))
    assert driver_hops == ["_begun", "rollback"]
    async with sqlite_engine.connect() as conn:
        assert (await conn.execute(text("SELECT v FROM r"))).scalars().all() == ["kept"]
