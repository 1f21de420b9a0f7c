"""`stateward init [--db URL] --key-file KEYFILE`: schema + system registry genesis.

Creates the key file when it is missing (mode 0600), migrates the database and writes the
genesis event granting `admin` to that key. Running it again changes nothing (exit 0, and
a note on stderr when the deployment already belongs to another operator key).
Prints `net <deployment id>` on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from stateward.commands.runtime_args import cli_runtime
from stateward.domain.errors import DomainError
from stateward.governance.keys import KeyPair, generate_keypair, read_key_file, write_key_file
from stateward.runtime.access.genesis import init


def load_or_create_key(path: str) -> KeyPair:
    """The key in `path`, written first (mode 0600) when the file does not exist."""
    if not Path(path).exists():
        keypair = generate_keypair()
        try:
            write_key_file(path, keypair)
            print(f"init: wrote a new key to {path}", file=sys.stderr)
            return keypair
        except FileExistsError:
            pass
    return read_key_file(path)


async def _init(args: argparse.Namespace, keypair: KeyPair) -> int:
    async with cli_runtime(args, require_init=False) as runtime:
        result = await init(runtime, keypair)
    if result.created:
        print(f"init: genesis written; admin {keypair.public}", file=sys.stderr)
    elif keypair.public not in result.admins:
        print(f"init: already initialized; {keypair.public} is not a system admin", file=sys.stderr)
    else:
        print("init: already initialized; nothing changed", file=sys.stderr)
    if result.node_trusted:
        print(f"init: trusted this node's key {runtime.node_public}", file=sys.stderr)
    print(f"net {result.net}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Initialize the deployment; 0 on success (also when already done), 2 on bad usage."""
    try:
        keypair = load_or_create_key(args.key_file)
    except (DomainError, OSError) as exc:
        print(f"init: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_init(args, keypair))
    except (DomainError, ValueError, OSError) as exc:
        print(f"init: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
