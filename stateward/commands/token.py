"""`stateward token --key-file KEYFILE [--db URL] [--label L] [--ttl SECONDS]`.

Prints ONE API token for the key's actor on stdout and nothing else (scripts capture it);
only its sha256 is stored. Messages go to stderr; exit 2 on bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from stateward.commands.runtime_args import cli_runtime
from stateward.domain.errors import DomainError
from stateward.governance.keys import read_key_file
from stateward.runtime.access.tokens import create_api_token


async def _token(args: argparse.Namespace, actor: str) -> str:
    async with cli_runtime(args) as runtime:
        token, _record = await create_api_token(runtime, actor, args.label, args.ttl)
    return token


def run(args: argparse.Namespace) -> int:
    """Create and print a token; 0, or 2 on bad usage (unreadable key file, bad ttl)."""
    try:
        keypair = read_key_file(args.key_file)
        token = asyncio.run(_token(args, keypair.public))
    except (DomainError, ValueError, OSError) as exc:
        print(f"token: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    print(token)
    return 0
