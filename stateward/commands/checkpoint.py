"""`stateward checkpoint [--db URL] [--sign]`: print the latest signed checkpoint of the
deployment log as JSON (what `verify --checkpoint` takes). `--sign` first signs a fresh
one with this node's key when the log grew. Exit 1 when there is no checkpoint yet."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from stateward.commands.runtime_args import cli_runtime
from stateward.domain.errors import DomainError


async def _latest(args: argparse.Namespace) -> dict[str, Any] | None:
    from stateward.runtime.insight.checkpoints import checkpoint, latest

    async with cli_runtime(args, register_node=bool(args.sign)) as runtime:
        if args.sign:
            await checkpoint(runtime)
        found = await latest(runtime)
    return None if found is None else found.as_json()


def run(args: argparse.Namespace) -> int:
    """Print the latest checkpoint; return the exit code."""
    try:
        found = asyncio.run(_latest(args))
    except (DomainError, ValueError, OSError) as exc:
        print(f"checkpoint: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    if found is None:
        print("checkpoint: the log has no checkpoint yet (try --sign)", file=sys.stderr)
        return 1
    print(json.dumps(found, indent=2))
    return 0
