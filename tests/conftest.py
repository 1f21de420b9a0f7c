"""Shared fixtures: fresh, migrated databases on SQLite and PostgreSQL.

Fixtures (function scope, one fresh database per test):
- `db_kind`      parametrized over "sqlite" and "postgres" (postgres skips with a reason
                 when STATEWARD_TEST_POSTGRES_URL is unset);
- `db_url`       a fresh migrated database of that kind, dropped after the test;
- `engine`       `stateward.persistence.create_engine(db_url)`, disposed after the test;
- `uow_factory`  a `UnitOfWorkFactory` on that engine;
- `sqlite_db_url` / `postgres_db_url`  the same for one backend only.
Helpers (plain functions of this module; fixtures are the way tests reach them):
- `make_database_url(kind) -> str`  a fresh migrated database (dropped at session end
  unless `drop_database(url)` is called earlier);
- `drop_database(url)`.
PostgreSQL databases are created by copying a migrated template database made once per
test session; all names carry a random suffix, so concurrent test runs on the same
server never collide.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import settings
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from stateward.persistence import UnitOfWorkFactory, create_engine, init_schema
from stateward.persistence.uow import DbTimeouts

# Property tests check behaviour, not speed: a shared, loaded CI box can stall one example
# past Hypothesis's 200 ms default deadline, which would fail the run for no behaviour.
settings.register_profile("stateward", deadline=None)
settings.load_profile("stateward")

POSTGRES_ENV = "STATEWARD_TEST_POSTGRES_URL"
KINDS = ("sqlite", "postgres")
T = TypeVar("T")

_lock = threading.Lock()
_run_id = uuid.uuid4().hex[:10]
_tmpdir: Path | None = None
_templates: dict[str, str] = {}
_created: set[str] = set()


def postgres_admin_url() -> str | None:
    """The PostgreSQL URL tests may use (STATEWARD_TEST_POSTGRES_URL), or None."""
    return os.environ.get(POSTGRES_ENV) or None


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on a private loop in a thread (works inside async tests)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as error:  # re-raised in the caller's thread
            box["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def _sqlite_dir() -> Path:
    global _tmpdir
    if _tmpdir is None:
        _tmpdir = Path(tempfile.mkdtemp(prefix=f"stateward-test-{_run_id}-"))
    return _tmpdir


async def _migrate(url: str) -> None:
    engine = create_engine(url)
    try:
        await init_schema(engine)
    finally:
        await engine.dispose()


async def _admin(sql: str) -> None:
    import asyncpg

    admin = make_url(postgres_admin_url() or "").set(drivername="postgresql")
    conn = await asyncpg.connect(admin.render_as_string(hide_password=False))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _template(kind: str) -> str:
    """The migrated template of `kind` for this session (made on first use)."""
    with _lock:
        if kind in _templates:
            return _templates[kind]
        if kind == "sqlite":
            path = _sqlite_dir() / "template.db"
            url = f"sqlite+aiosqlite:///{path}"
            _run(_migrate(url))
            _templates[kind] = str(path)
        else:
            name = f"sw_tmpl_{_run_id}"
            _run(_admin(f'CREATE DATABASE "{name}"'))
            _created.add(name)
            base = make_url(postgres_admin_url() or "")
            _run(_migrate(base.set(database=name).render_as_string(hide_password=False)))
            _templates[kind] = name
        return _templates[kind]


def make_database_url(kind: str) -> str:
    """A fresh, empty, fully migrated database of `kind` ('sqlite' or 'postgres').

    Skips the calling test when `kind` is 'postgres' and STATEWARD_TEST_POSTGRES_URL is
    unset. The database is dropped at the end of the session at the latest.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown database kind {kind!r}; use one of {KINDS}")
    if kind == "postgres" and postgres_admin_url() is None:
        pytest.skip(f"{POSTGRES_ENV} is not set: PostgreSQL tests skipped")
    template = _template(kind)
    suffix = uuid.uuid4().hex[:12]
    if kind == "sqlite":
        path = _sqlite_dir() / f"db-{suffix}.db"
        shutil.copyfile(template, path)
        return f"sqlite+aiosqlite:///{path}"
    name = f"sw_test_{_run_id}_{suffix}"
    _run(_admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    with _lock:
        _created.add(name)
    base = make_url(postgres_admin_url() or "")
    return base.set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    """Drop a database made by `make_database_url` (files removed for SQLite)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{parsed.database}{suffix}").unlink(missing_ok=True)
        return
    name = parsed.database or ""
    _run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    with _lock:
        _created.discard(name)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Drop every database this session created and still holds."""
    for name in sorted(_created, key=lambda n: n.startswith("sw_tmpl_")):
        try:
            _run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        except Exception as error:  # never mask the test result
            print(f"warning: could not drop test database {name}: {error}")
    _created.clear()
    if _tmpdir is not None:
        shutil.rmtree(_tmpdir, ignore_errors=True)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_kind(request: pytest.FixtureRequest) -> str:
    """'sqlite' or 'postgres' (the test runs once per backend)."""
    kind = str(request.param)
    if kind == "postgres" and postgres_admin_url() is None:
        pytest.skip(f"{POSTGRES_ENV} is not set: PostgreSQL tests skipped")
    return kind


@pytest.fixture
def db_url(db_kind: str) -> Iterator[str]:
    """A fresh migrated database of `db_kind`, dropped after the test."""
    url = make_database_url(db_kind)
    yield url
    drop_database(url)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def module_db_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh migrated database of each kind shared by one test module (for fixtures
    that are expensive to build, such as the authorization matrix's world)."""
    kind = str(request.param)
    if kind == "postgres" and postgres_admin_url() is None:
        pytest.skip(f"{POSTGRES_ENV} is not set: PostgreSQL tests skipped")
    url = make_database_url(kind)
    yield url
    drop_database(url)


@pytest.fixture
def sqlite_db_url() -> Iterator[str]:
    """A fresh migrated SQLite database (WAL, temp file), removed after the test."""
    url = make_database_url("sqlite")
    yield url
    drop_database(url)


@pytest.fixture
def postgres_db_url() -> Iterator[str]:
    """A fresh migrated PostgreSQL database (skips when not configured), dropped after."""
    url = make_database_url("postgres")
    yield url
    drop_database(url)


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on the test's database, disposed after the test."""
    eng = create_engine(db_url)
    yield eng
    await eng.dispose()


# The production bound on an idle writing transaction (1 s, `DbTimeouts`) ends a
# transaction whose process is descheduled that long; the runtime retries such a write,
# a persistence test calling repositories directly does not. On a box loaded by the whole
# suite that is a flake, not a finding, so these tests allow 30 s. The bound itself is
# pinned by tests/runtime/test_reliability.py through the runtime's own settings.
TEST_TIMEOUTS = DbTimeouts(lock_ms=1000, idle_ms=30_000)


@pytest.fixture
def uow_factory(engine: AsyncEngine) -> UnitOfWorkFactory:
    """Units of work on the test's database (idle bound relaxed, see TEST_TIMEOUTS)."""
    return UnitOfWorkFactory.from_engine(engine, TEST_TIMEOUTS)


@pytest.fixture
def driver_hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions run on aiosqlite's driver thread, in order (each is
    one round trip from the event loop)."""
    import aiosqlite

    made: list[str] = []
    plain = aiosqlite.Connection._execute

    async def counted(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(getattr(fn, "__name__", repr(fn)))
        return await plain(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    return made
