"""The migrations build the whole schema on both backends, matching the models."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from persistence_factories import new_process
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

from stateward.persistence import UnitOfWorkFactory, init_schema
from stateward.persistence.db import (
    SQLITE_CACHE_KIB,
    create_engine,
    current_revision,
    downgrade_schema,
    sqlite_file,
)
from stateward.persistence.models import Base
from stateward.settings import Settings

EXPECTED_TABLES = {
    "processes",
    "events",
    "workflows",
    "workflow_versions",
    "modules",
    "role_grants",
    "key_status",
    "api_tokens",
    "auth_challenges",
    "assignments",
    "delegated_tasks",
    "assignment_candidates",
    "schedules",
    "notifications",
    "webhooks",
    "webhook_deliveries",
    "outbox",
    "meta",
    "log_nodes",
    "log_head",
    "checkpoints",
    "messages",
    "message_waits",
    "message_deliveries",
    "state_visits",
    "batch_operations",
    "batch_items",
    "incidents",
    "process_data",
}


async def test_migrations_create_every_table(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    assert tables >= EXPECTED_TABLES
    assert await current_revision(engine) == "0021"


async def test_migrated_schema_matches_the_models(engine: AsyncEngine) -> None:
    def for_this_dialect(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
        # Alembic ignores `ddl_if`: an index declared for PostgreSQL only (the GIN index
        # on instance data) is not expected on SQLite.
        only = getattr(obj, "_ddl_if", None)
        return only is None or only.dialect in (None, sync_conn_dialect[0])

    sync_conn_dialect: list[str] = []

    def diff(sync_conn):  # type: ignore[no-untyped-def]
        sync_conn_dialect.append(sync_conn.dialect.name)
        opts = {"compare_type": True, "include_object": for_this_dialect}
        context = MigrationContext.configure(sync_conn, opts=opts)
        return compare_metadata(context, Base.metadata)

    async with engine.connect() as conn:
        assert await conn.run_sync(diff) == []


async def test_sla_and_outbox_indexes_are_partial(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        indexes = await conn.run_sync(lambda c: inspect(c).get_indexes("processes"))
    names = {i["name"] for i in indexes}
    assert {"ix_processes_sla_warn_pending", "ix_processes_sla_due_pending"} <= names
    assert "ix_processes_status_last_event_at" in names


async def test_init_schema_twice_changes_nothing(engine: AsyncEngine) -> None:
    await init_schema(engine)
    await init_schema(engine)
    assert await current_revision(engine) == "0021"


async def test_sqlite_connections_use_wal_and_foreign_keys(sqlite_db_url: str) -> None:
    engine = create_engine(sqlite_db_url)
    try:
        async with engine.connect() as conn:
            mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar_one()
            fks = (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar_one()
            sync = (await conn.exec_driver_sql("PRAGMA synchronous")).scalar_one()
            cache = (await conn.exec_driver_sql("PRAGMA cache_size")).scalar_one()
    finally:
        await engine.dispose()
    assert (mode, fks, sync) == ("wal", 1, 1)  # synchronous NORMAL == 1
    assert cache == -SQLITE_CACHE_KIB  # KiB, not SQLite's 2,000 (large rows' pages stay)


async def test_sqlite_synchronous_full_is_applied_to_every_connection(sqlite_db_url: str) -> None:
    engine = create_engine(sqlite_db_url, sqlite_synchronous="full")
    try:
        async with engine.connect() as conn:
            sync = (await conn.exec_driver_sql("PRAGMA synchronous")).scalar_one()
    finally:
        await engine.dispose()
    assert sync == 2  # FULL


def test_sqlite_synchronous_setting_is_validated() -> None:
    assert Settings.from_env({}).sqlite_synchronous == "normal"
    assert Settings.from_env({"STATEWARD_SQLITE_SYNCHRONOUS": "FULL"}).sqlite_synchronous == "full"
    with pytest.raises(ValueError, match="STATEWARD_SQLITE_SYNCHRONOUS"):
        Settings.from_env({"STATEWARD_SQLITE_SYNCHRONOUS": "off"})
    with pytest.raises(ValueError, match="sqlite_synchronous"):
        create_engine("sqlite+aiosqlite:///x.db", sqlite_synchronous="off")


async def test_timestamps_come_back_aware_utc(uow_factory: UnitOfWorkFactory) -> None:
    paris = timezone(timedelta(hours=1))
    local = datetime(2026, 11, 30, 3, 21, 9, 123456, tzinfo=paris)
    record = new_process(now=local)
    async with uow_factory() as uow:
        await uow.processes.add(record)
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        loaded = await uow.processes.get(record.id)
    assert loaded is not None
    assert loaded.created_at.tzinfo is not None
    assert loaded.created_at.utcoffset() == timedelta(0)
    assert loaded.created_at == local
    assert loaded.created_at == datetime(2026, 11, 30, 2, 21, 9, 123456, tzinfo=UTC)


async def test_naive_timestamps_are_refused(uow_factory: UnitOfWorkFactory) -> None:
    record = new_process(now=datetime(2026, 11, 30, 2, 0, 0))
    async with uow_factory() as uow:
        with pytest.raises(Exception, match="naive"):
            await uow.processes.add(record)


async def test_foreign_keys_are_enforced(uow_factory: UnitOfWorkFactory) -> None:
    from persistence_factories import new_event

    async with uow_factory() as uow:
        with pytest.raises(Exception, match=r"(?i)foreign key"):
            await uow.events.append(new_event("no-such-process", 1))


async def test_uncommitted_work_is_rolled_back(uow_factory: UnitOfWorkFactory) -> None:
    record = new_process()
    async with uow_factory() as uow:
        await uow.processes.add(record)
    async with uow_factory(readonly=True) as uow:
        assert await uow.processes.get(record.id) is None
        count = (await uow.session.execute(text("SELECT count(*) FROM processes"))).scalar_one()
    assert count == 0


async def test_readers_do_not_wait_for_a_writer(uow_factory: UnitOfWorkFactory) -> None:
    import asyncio

    record = new_process()
    async with uow_factory() as writer:
        await writer.processes.add(record)  # holds the write lock until the block ends

        async def read() -> object:
            async with uow_factory(readonly=True) as reader:
                return await reader.processes.get(record.id)

        assert await asyncio.wait_for(read(), timeout=5) is None


def test_json_columns_round_trip_through_orjson_and_fall_back_for_what_it_refuses() -> None:
    from stateward.persistence.db import dumps_json, loads_json

    value = {"é": ["ü", 1.5, 2**53 - 1, None, True, {"n": -(2**63)}], "": {}}
    assert loads_json(dumps_json(value)) == value
    assert dumps_json({"big": 2**70}) == '{"big": 1180591620717411303424}'  # json.dumps
    assert loads_json("[1, NaN]")[0] == 1  # orjson refuses NaN: the standard library reads it


async def test_the_unused_hash_index_of_events_is_dropped_and_comes_back_on_downgrade(
    engine: AsyncEngine,
) -> None:
    """Migration 0018: `ix_events_hash` (no query reads events by hash) is gone; a
    downgrade to 0017 creates it again, and the upgrade drops it again."""

    def names(c):  # type: ignore[no-untyped-def]
        return {i["name"] for i in inspect(c).get_indexes("events")}

    async with engine.connect() as conn:
        assert "ix_events_hash" not in await conn.run_sync(names)
    await downgrade_schema(engine, "0017")
    async with engine.connect() as conn:
        assert "ix_events_hash" in await conn.run_sync(names)
    await init_schema(engine)
    async with engine.connect() as conn:
        assert "ix_events_hash" not in await conn.run_sync(names)
    assert await current_revision(engine) == "0021"


async def test_events_identity_has_no_unique_index_and_it_comes_back_on_downgrade(
    engine: AsyncEngine,
) -> None:
    """Migration 0021: (actor, nonce) alone keeps an envelope from being stored twice;
    `uq_events_identity` is gone, a downgrade to 0020 creates it again (SQLite: the
    table rebuilt), and the upgrade drops it again. On SQLite the migrating connection
    goes back to the pool with foreign keys on."""

    def uniques(c):  # type: ignore[no-untyped-def]
        return {tuple(u["column_names"]) for u in inspect(c).get_unique_constraints("events")}

    async with engine.connect() as conn:
        found = await conn.run_sync(uniques)
    assert found == {("process_id", "seq"), ("actor", "nonce")}
    await downgrade_schema(engine, "0020")
    async with engine.connect() as conn:
        assert ("identity",) in await conn.run_sync(uniques)
    await init_schema(engine)
    assert await current_revision(engine) == "0021"
    async with engine.connect() as conn:
        assert ("identity",) not in await conn.run_sync(uniques)
        if conn.dialect.name == "sqlite":
            assert (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar_one() == 1


async def test_a_sqlite_migration_that_would_break_a_reference_is_not_committed(
    sqlite_db_url: str,
) -> None:
    """The migrations run with SQLite's foreign keys off (a rebuilt table is dropped and
    renamed); `PRAGMA foreign_key_check` then refuses to commit broken references: here
    a version row pointing at an event that does not exist (written around the checks
    by a plain connection, whose foreign keys are off by default)."""
    engine = create_engine(sqlite_db_url)
    try:
        await init_schema(engine)
        path = sqlite_file(sqlite_db_url)
        assert path is not None
        plain = sqlite3.connect(path)
        with plain:
            plain.execute(
                "INSERT INTO workflows (path, namespace, name, latest_version, removed, "
                "created_at, updated_at) VALUES ('a/b', 'a', 'b', 1, 0, 'x', 'x')"
            )
            plain.execute(
                "INSERT INTO workflow_versions (path, version, hash, definition, created_at, "
                "event_id, hash_scheme) VALUES ('a/b', 1, 'h', '{}', 'x', 999, 2)"
            )
        plain.close()
        with pytest.raises(RuntimeError, match="breaks foreign keys"):
            await downgrade_schema(engine, "0020")
        assert await current_revision(engine) == "0021"
    finally:
        await engine.dispose()


async def test_foreign_keys_are_read_back_before_a_migrating_connection_is_pooled_again(
    sqlite_db_url: str,
) -> None:
    """`_foreign_keys_back_on` reports False when SQLite ignored the PRAGMA (inside an
    open transaction), so `_migrate_sqlite` drops such a connection instead of pooling a
    connection that would not enforce foreign keys."""
    import aiosqlite

    from stateward.persistence.db import _foreign_keys_back_on

    path = sqlite_file(sqlite_db_url)
    assert path is not None
    async with aiosqlite.connect(path, isolation_level=None) as driver:
        await driver.execute("PRAGMA foreign_keys=OFF")
        await driver.execute("BEGIN")
        assert not await _foreign_keys_back_on(driver)  # ignored inside the transaction
        await driver.execute("COMMIT")
        assert await _foreign_keys_back_on(driver)
