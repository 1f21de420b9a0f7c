"""The SQLite engine's pool (`db.create_engine`): the connection returned last is handed
out next, so the group-commit writer's next batch runs on the connection whose page cache
its last batch filled; in-memory databases keep SQLAlchemy's single static connection."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import StaticPool

from stateward.persistence import create_engine


async def _driver(conn: AsyncConnection) -> Any:
    return (await conn.get_raw_connection()).driver_connection


async def test_the_connection_returned_last_is_handed_out_next(sqlite_engine: AsyncEngine) -> None:
    async with sqlite_engine.connect() as first, sqlite_engine.connect() as second:
        one, two = await _driver(first), await _driver(second)
        assert one is not two  # two pooled connections
    # `second` went back first, `first` last: a queue would hand out `second` now
    async with sqlite_engine.begin() as conn:
        assert await _driver(conn) is one
        await conn.execute(text("CREATE TABLE t (v INTEGER)"))
        await conn.execute(text("INSERT INTO t VALUES (1)"))
    for _ in range(3):  # a writer's transactions one after the other: always the same one
        async with sqlite_engine.begin() as conn:
            assert await _driver(conn) is one
            await conn.execute(text("UPDATE t SET v = v + 1"))
    async with sqlite_engine.connect() as conn:
        assert (await conn.execute(text("SELECT v FROM t"))).scalar_one() == 4


@pytest.mark.parametrize(
    "memory, options",
    [(True, {}), (False, {"poolclass": StaticPool})],
    ids=["in-memory database: SQLAlchemy's one static connection", "the caller's pool"],
)
async def test_a_pool_not_queued_stays_as_it_was(
    sqlite_db_url: str, memory: bool, options: dict[str, Any]
) -> None:
    engine = create_engine("sqlite+aiosqlite:///:memory:" if memory else sqlite_db_url, **options)
    try:
        assert isinstance(engine.pool, StaticPool)
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1
    finally:
        await engine.dispose()
