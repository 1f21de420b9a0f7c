"""SQLite's WAL checkpoints run in the background after write commits
(`persistence/walcheck.py`), not inside a COMMIT of the writer; the engine's own
connections checkpoint only past the safety bound."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from persistence_factories import new_process
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from stateward.persistence import UnitOfWorkFactory, create_engine, walcheck


async def test_connections_checkpoint_only_past_the_safety_bound(
    sqlite_engine: AsyncEngine,
) -> None:
    async with sqlite_engine.connect() as conn:
        pages = (await conn.execute(text("PRAGMA wal_autocheckpoint"))).scalar_one()
    assert pages == walcheck.SAFETY_PAGES > 1000


async def test_a_write_commit_starts_one_background_checkpoint(
    sqlite_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = walcheck.database_file(sqlite_engine.sync_engine)
    assert path is not None and Path(path).exists()
    monkeypatch.setattr(walcheck, "INTERVAL", 3600.0)  # one start per engine in this test
    uows = UnitOfWorkFactory.from_engine(sqlite_engine)
    before = dict(walcheck.stats)
    for _ in range(3):
        async with uows() as uow:
            await uow.processes.add(new_process())
            await uow.commit()
    for _ in range(200):  # the executor's thread answers
        if walcheck.stats["done"] > before["done"]:
            break
        await asyncio.sleep(0.01)
    assert walcheck.stats["started"] == before["started"] + 1  # then rate-limited
    assert walcheck.stats["done"] == before["done"] + 1
    assert walcheck.stats["frames"] > before["frames"]
    # everything committed was copied, or is copied now: nothing left behind
    busy, frames, copied = await asyncio.to_thread(walcheck.checkpoint, path)
    assert busy == 0 and frames == copied
    async with uows(readonly=True) as uow:  # readers unaffected
        count = await uow.session.execute(text("SELECT count(*) FROM processes"))
        assert count.scalar_one() == 3


async def test_no_checkpoint_without_a_database_file(tmp_path: Path) -> None:
    missing = tmp_path / "gone.db"
    assert walcheck.checkpoint(str(missing)) is None
    assert not missing.exists()  # opened read-write only: never created
    memory = create_engine("sqlite+aiosqlite:///:memory:")
    try:
        assert walcheck.database_file(memory.sync_engine) is None
    finally:
        await memory.dispose()
