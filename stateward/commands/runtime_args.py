"""What the database-touching CLI commands share: settings from `--db`, an open runtime.

Commands print findings on stdout and everything else on stderr; a `DomainError`
raised while opening is reported as bad usage by the caller.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from stateward.runtime.core.services import Runtime
from stateward.settings import Settings


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings from the environment, with `--db` (and `--node-key-file`) applied."""
    return Settings.from_env(
        database_url=getattr(args, "db", None),
        node_key_file=getattr(args, "node_key_file", None),
    )


@asynccontextmanager
async def cli_runtime(
    args: argparse.Namespace, *, register_node: bool = True
) -> AsyncIterator[Runtime]:
    """An open runtime on the command's database (schema migrated), closed afterwards."""
    runtime = await Runtime.open(settings_from(args), register_node=register_node)
    try:
        yield runtime
    finally:
        await runtime.close()
