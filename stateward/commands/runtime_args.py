"""What the database-touching CLI commands share: settings from `--db`, an open runtime.

Commands print findings on stdout and everything else on stderr; a `DomainError`
raised while opening is reported as bad usage by the caller. Every command but `init`
first checks that the database was initialised (`NOT_INITIALIZED`, "run stateward init
first") and, when it was not, touches nothing: no SQLite file, no schema, no node key.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import inspect, select, text
from sqlalchemy.engine import make_url

from stateward.domain.errors import DomainError
from stateward.domain.paths import SYSTEM_NAMESPACE, registry_id
from stateward.persistence.db import create_engine, sqlite_file
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings

NOT_INITIALIZED = "NOT_INITIALIZED"


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings from the environment, with `--db` (and `--node-key-file`) applied."""
    return Settings.from_env(
        database_url=getattr(args, "db", None),
        node_key_file=getattr(args, "node_key_file", None),
    )


def _never_initialised(url: str) -> DomainError:
    return DomainError(
        NOT_INITIALIZED,
        f"the database {url} was never initialised: run stateward init first",
        details={"hint": "stateward init --db URL --key-file KEY"},
    )


def _has_genesis(connection: Any) -> bool:
    if not inspect(connection).has_table("processes"):
        return False
    found = connection.execute(
        select(text("1")).select_from(text("processes")).where(text("id = :id")),
        {"id": registry_id(SYSTEM_NAMESPACE)},
    )
    return found.first() is not None


async def require_initialised(settings: Settings) -> None:
    """NOT_INITIALIZED unless the database holds the system registry's genesis. A SQLite
    file that does not exist is not created; nothing is written either way."""
    url = make_url(settings.database_url)
    shown = url.render_as_string(hide_password=True)
    db = sqlite_file(url)
    if db is not None and not db.exists():
        raise _never_initialised(shown)
    engine = create_engine(settings.database_url)
    try:
        async with engine.connect() as connection:
            initialised = await connection.run_sync(_has_genesis)
    finally:
        await engine.dispose()
    if not initialised:
        raise _never_initialised(shown)


@asynccontextmanager
async def cli_runtime(
    args: argparse.Namespace, *, register_node: bool = True, require_init: bool = True
) -> AsyncIterator[Runtime]:
    """An open runtime on the command's database (schema migrated), closed afterwards;
    NOT_INITIALIZED (and nothing created) on a database `init` never ran on."""
    settings = settings_from(args)
    if require_init:
        await require_initialised(settings)
    runtime = await Runtime.open(settings, register_node=register_node)
    try:
        yield runtime
    finally:
        await runtime.close()
