"""`stateward key rotate|revoke`: the registry events of key rotation and revocation,
built and signed from key files (no envelope to copy by hand).

- `key rotate --key-file OLD --new-key-file NEW [--db URL]`: a `rotate_key` event signed
  by the OLD key naming NEW's public key (NEW is created, mode 0600, when missing): OLD's
  grants move to NEW and OLD signs nothing more. Prints NEW's public key.
- `key revoke --key-file ADMIN KEY [--db URL]`: a `revoke_key` event signed by a system
  admin: events signed by KEY from now on are refused; its history still verifies.
- `key trust --key-file ADMIN NODE_KEY` / `key distrust --key-file ADMIN NODE_KEY`: a
  `trust_node` / `distrust_node` event signed by a system admin: the node key may attest
  events (sign for `system`, visitors and token users) from the next log index on, or no
  longer.
Exit 0 on success, 1 when the registry refuses the event, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from stateward.commands.runtime_args import cli_runtime
from stateward.domain.errors import DomainError
from stateward.governance.keys import generate_keypair, read_key_file, write_key_file


async def _rotate(args: argparse.Namespace) -> str:
    from stateward.runtime.access.registry import rotate_key

    old = read_key_file(args.key_file)
    target = Path(args.new_key_file)
    if target.exists():
        new = read_key_file(target)
    else:
        new = generate_keypair()
        write_key_file(target, new)
    async with cli_runtime(args, register_node=False) as runtime:
        await rotate_key(runtime, old, new.public)
    return new.public


async def _revoke(args: argparse.Namespace) -> str:
    from stateward.runtime.access.registry import revoke_key

    admin = read_key_file(args.key_file)
    async with cli_runtime(args, register_node=False) as runtime:
        await revoke_key(runtime, admin, args.key)
    return str(args.key)


async def _node(args: argparse.Namespace) -> str:
    from stateward.runtime.access.registry import distrust_node, trust_node

    admin = read_key_file(args.key_file)
    change = trust_node if args.key_command == "trust" else distrust_node
    async with cli_runtime(args, register_node=False) as runtime:
        await change(runtime, admin, args.key)
    return str(args.key)


def run(args: argparse.Namespace) -> int:
    """Sign and apply the key event; print the affected public key."""
    actions = {"rotate": _rotate, "revoke": _revoke, "trust": _node, "distrust": _node}
    action = actions[args.key_command]
    try:
        key = asyncio.run(action(args))
    except DomainError as exc:
        print(f"key {args.key_command}: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        print(f"key {args.key_command}: {exc}", file=sys.stderr)
        return 2
    print(key)
    return 0
