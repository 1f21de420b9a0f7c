"""Engines, sessions and schema setup for SQLite (embedded default) and PostgreSQL.

SQLite: WAL, `synchronous=NORMAL` (or FULL: `create_engine(..., sqlite_synchronous="full")`,
STATEWARD_SQLITE_SYNCHRONOUS), foreign keys on, a busy timeout, and transactions that
start with `BEGIN IMMEDIATE` (a deferred read-then-write transaction in WAL mode fails
with SQLITE_BUSY instead of waiting once another writer commits first). Read-only units of
work may ask for a plain `BEGIN` through the `sqlite_begin` execution option.
PostgreSQL: asyncpg with a connection pool. The schema is created by the alembic
migrations (`init_schema`), never by `metadata.create_all`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

try:  # a declared dependency; a venv made before it was added still works, more slowly
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.ext.asyncio import create_async_engine as _create_async_engine

from stateward.persistence import onehop
from stateward.persistence.types import JsonText

MIGRATIONS = Path(__file__).parent / "migrations"
#: Key of the PostgreSQL advisory lock that serialises concurrent `init_schema` calls.
SCHEMA_LOCK_KEY = 0x5354_4157_0001
SQLITE_BUSY_TIMEOUT_MS = 30_000
BEGIN_OPTION = "sqlite_begin"
#: Pooled connection `info` flag: its transaction was committed on the driver's thread.
SKIP_DRIVER_COMMIT = "stateward.driver_committed"
SQLITE_SYNCHRONOUS = ("normal", "full")
#: Page cache per SQLite connection, KiB (`PRAGMA cache_size=-N`; SQLite's default is
#: 2,000): 24 instances of 64 KB are 430 overflow pages, which SQLite's default
#: evicted between two events of one instance, so each UPDATE read them back from the
#: OS (≈ 50 KB per event). 16 MiB, as the process data cache (docs/performance.md,
#: `data18c`); pages are allocated as they are read.
SQLITE_CACHE_KIB = 16 * 1024
#: `PRAGMA wal_autocheckpoint` of the engine's SQLite connections: checkpoints run in the
#: background (`walcheck`); a COMMIT does one itself only when the WAL has grown past
#: this many pages (the background one fell behind, or nothing calls it).
SQLITE_WAL_SAFETY_PAGES = 10_000


def is_sqlite(url: str) -> bool:
    """True when `url` names a SQLite database."""
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_file(url: str | URL) -> Path | None:
    """The database file of a SQLite URL, or None (another backend, an in-memory
    database): where a deployment's SQLite file and the files kept beside it live."""
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    return Path(database)


def create_engine(
    url: str,
    *,
    echo: bool = False,
    sqlite_synchronous: str = "normal",
    sqlite_one_hop: bool = True,
    **kwargs: Any,
) -> AsyncEngine:
    """An async engine for `url` (sqlite+aiosqlite:// or postgresql+asyncpg://), tuned.

    `sqlite_synchronous` is SQLite's `PRAGMA synchronous`: "normal" or "full".
    `sqlite_one_hop=False` keeps SQLAlchemy's own aiosqlite cursor and BEGIN (`onehop`
    off: the benches' bare baseline, a plain application on the same libraries). Extra
    keyword arguments go to SQLAlchemy's `create_async_engine` (e.g. `pool_size`).
    """
    if sqlite_synchronous not in SQLITE_SYNCHRONOUS:
        raise ValueError(f"sqlite_synchronous must be one of {SQLITE_SYNCHRONOUS}")
    kwargs.setdefault("json_serializer", dumps_json)
    kwargs.setdefault("json_deserializer", loads_json)
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.drivername != "sqlite+aiosqlite":
            parsed = parsed.set(drivername="sqlite+aiosqlite")
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        if _queue_pooled(parsed, kwargs):
            # The connection returned last is handed out next: the group-commit writer
            # gets back the connection whose page cache its last batch filled (a batch
            # on another pooled connection starts cold: SQLite drops a connection's
            # whole cache when another one has written; docs/decisions.md).
            kwargs.setdefault("pool_use_lifo", True)
        engine = _create_async_engine(parsed, echo=echo, **kwargs)
        _tune_sqlite(engine, sqlite_synchronous.upper(), one_hop=sqlite_one_hop)
        return engine
    if backend == "postgresql":
        if parsed.drivername != "postgresql+asyncpg":
            parsed = parsed.set(drivername="postgresql+asyncpg")
        options: dict[str, Any] = {
            "pool_size": 10,
            "max_overflow": 30,
            "pool_pre_ping": True,
            "pool_recycle": 1800,
        }
        options.update(kwargs)
        return _create_async_engine(parsed, echo=echo, **options)
    raise ValueError(f"unsupported database URL {url!r}: use sqlite+aiosqlite or postgresql")


def _queue_pooled(url: URL, kwargs: dict[str, Any]) -> bool:
    """True when SQLAlchemy pools connections to this SQLite `url` in a queue (a file
    database; SQLAlchemy's aiosqlite dialect gives an in-memory one a single static
    connection) and the caller chose no pool of its own."""
    in_memory = sqlite_file(url) is None or url.query.get("mode") == "memory"
    return not in_memory and "poolclass" not in kwargs


def dumps_json(value: Any) -> str:
    """The text of a JSON column (orjson: instance data is written at every event, and the
    standard library took ~2 ms for 64 KB); values orjson refuses (integers past 64 bits,
    non-string keys) go through `json.dumps`; a `JsonText` holds that text already."""
    if type(value) is JsonText:
        return value.text
    if orjson is None:  # pragma: no cover
        return json.dumps(value)
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def loads_json(text: str | bytes) -> Any:
    """A JSON column's value (orjson; `json.loads` for what orjson refuses)."""
    if orjson is None:  # pragma: no cover
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _tune_sqlite(engine: AsyncEngine, synchronous: str, *, one_hop: bool = True) -> None:
    """Install the PRAGMAs and the explicit BEGIN on every new SQLite connection (and,
    with `one_hop`, the one-round-trip cursor), and the dialect's COMMIT that skips a
    transaction already committed on the driver's thread (`skip_driver_commit`)."""
    skip_driver_commit(engine)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        if one_hop:
            onehop.install(dbapi_connection)  # a statement in one driver round trip
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see `_on_begin`)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        cursor.execute(f"PRAGMA wal_autocheckpoint={SQLITE_WAL_SAFETY_PAGES}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get(BEGIN_OPTION, "IMMEDIATE")
        begin = "BEGIN" if mode == "DEFERRED" else f"BEGIN {mode}"
        # sent with the transaction's first statement, in its round trip (`onehop`)
        if not onehop.defer_begin(conn.connection.dbapi_connection, begin):
            conn.exec_driver_sql(begin)


def skip_driver_commit(engine: AsyncEngine) -> None:
    """Let a COMMIT done on the driver's own thread (`persistence/tail.py`) close
    SQLAlchemy's transaction without another round trip: while the pooled connection's
    `info` holds `SKIP_DRIVER_COMMIT`, the dialect's `do_commit` sends nothing. Only the
    tail sets it, around its `session.commit()`, after its own COMMIT returned. The
    pool's rollback-on-return when the session lets the connection go inside that call
    is skipped too (no transaction is open: the COMMIT went through)."""
    dialect = engine.sync_engine.dialect
    plain_commit, plain_rollback = dialect.do_commit, dialect.do_rollback

    def committed(dbapi_connection: Any) -> bool:
        try:  # a pooled connection; an ad-hoc one (first connect) has no `info`
            info = dbapi_connection.info
        except (AttributeError, NotImplementedError):
            return False
        return bool(info.get(SKIP_DRIVER_COMMIT))

    def do_commit(dbapi_connection: Any) -> None:
        if not committed(dbapi_connection):
            plain_commit(dbapi_connection)

    def do_rollback(dbapi_connection: Any) -> None:
        if not committed(dbapi_connection):
            plain_rollback(dbapi_connection)

    dialect.do_commit = do_commit  # type: ignore[method-assign]
    dialect.do_rollback = do_rollback  # type: ignore[method-assign]


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded attributes after commit (no hidden I/O afterwards)."""
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)


def alembic_config(connection: Connection | None = None) -> Config:
    """An alembic Config built in code (no alembic.ini), bound to `connection` if given."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


async def init_schema(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the database schema to `revision` by running the alembic migrations.

    Safe to call concurrently from several nodes: PostgreSQL serialises it with an
    advisory lock, SQLite with its write lock (`BEGIN IMMEDIATE`).
    """
    await _migrate(engine, partial(_upgrade, revision=revision))


async def downgrade_schema(engine: AsyncEngine, revision: str) -> None:
    """Take the database schema back to `revision` (the migrations' downgrades), as
    `init_schema` takes it forward."""
    await _migrate(engine, partial(_downgrade, revision=revision))


async def _migrate(engine: AsyncEngine, step: Callable[[Connection], None]) -> None:
    """Run `step` (alembic on a sync connection) in one transaction: PostgreSQL under
    the schema's advisory lock, SQLite as `_migrate_sqlite` says."""
    if engine.dialect.name == "sqlite":
        await _migrate_sqlite(engine, step)
        return
    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": SCHEMA_LOCK_KEY})
        await conn.run_sync(step)


async def _migrate_sqlite(engine: AsyncEngine, step: Callable[[Connection], None]) -> None:
    """SQLite: the migrations run with foreign keys off, and the result is checked with
    `PRAGMA foreign_key_check` before the COMMIT.

    A migration that changes a constraint rebuilds the table (alembic's batch mode:
    create a copy, drop the table, rename the copy). With foreign keys on, dropping a
    table that other rows reference fails, and renaming rewrites the references; SQLite
    lets them be switched off only outside a transaction, so here, on the connection,
    before its BEGIN. The check then refuses to commit a schema whose references no
    longer hold. The connection goes back to the pool only with foreign keys on again
    (read back); otherwise it is dropped."""
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        driver: Any = raw.driver_connection
        await (await driver.execute("PRAGMA foreign_keys=OFF")).close()
        try:
            async with conn.begin():
                await conn.run_sync(step)
                broken = (await conn.exec_driver_sql("PRAGMA foreign_key_check")).all()
                if broken:
                    raise RuntimeError(f"the migrated schema breaks foreign keys: {broken[:5]}")
        finally:
            if not await _foreign_keys_back_on(driver):
                await conn.invalidate()


async def _foreign_keys_back_on(driver: Any) -> bool:
    """Switch SQLite's foreign keys on again on `driver` (an aiosqlite connection) and
    read the setting back: False when that failed (a PRAGMA inside an open transaction
    is silently ignored; a broken connection raises)."""
    try:
        await (await driver.execute("PRAGMA foreign_keys=ON")).close()
        cursor = await driver.execute("PRAGMA foreign_keys")
        row = await cursor.fetchone()
        await cursor.close()
    except Exception:
        return False
    return row is not None and row[0] == 1


def _upgrade(connection: Connection, revision: str) -> None:
    command.upgrade(alembic_config(connection), revision)


def _downgrade(connection: Connection, revision: str) -> None:
    command.downgrade(alembic_config(connection), revision)


async def current_revision(engine: AsyncEngine) -> str | None:
    """The alembic revision the database is at (None before any migration)."""
    from alembic.runtime.migration import MigrationContext

    async with engine.connect() as conn:
        return await conn.run_sync(lambda c: MigrationContext.configure(c).get_current_revision())
