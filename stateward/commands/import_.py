"""`stateward import PACKAGE --key-file KEYFILE [--db URL]`: deploy a package, all or nothing.

PACKAGE is a file made by `stateward export` (or `-` for stdin). Every module and workflow
of it is validated first (pointers into the package: `/workflows/3/states/review/assign`);
then they are deployed through registry events signed by the key file's key — modules
first, `add_*` for new paths and `update_*` for live ones, nothing for content already
deployed unchanged — in ONE transaction: either all of them land or none does.

Findings on stdout as `PACKAGE: CODE pointer message`; progress on stderr. Exit 0 when
imported, 1 on any finding (nothing deployed), 2 on bad usage (unreadable package or key
file, a database that cannot be opened).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from stateward.commands.runtime_args import cli_runtime
from stateward.commands.validate import format_finding
from stateward.domain.errors import DomainError, Problem
from stateward.governance.keys import KeyPair, read_key_file
from stateward.observe.progress import progress
from stateward.runtime.access.registry import DeployedWorkflow
from stateward.runtime.packages.transfer import import_package


async def _import(args: argparse.Namespace, key: KeyPair, text: bytes) -> list[DeployedWorkflow]:
    async with cli_runtime(args) as runtime:
        with progress("import (one transaction)"):
            return await import_package(runtime, key, text)


def _read(source: str) -> bytes:
    return sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()


def run(args: argparse.Namespace) -> int:
    """Import `args.package`; 0 imported, 1 findings (nothing deployed), 2 bad usage."""
    try:
        text = _read(args.package)
    except OSError as exc:
        print(f"import: cannot read {args.package}: {exc}", file=sys.stderr)
        return 2
    try:
        key = read_key_file(args.key_file)
    except DomainError as exc:
        print(f"import: {exc.message}", file=sys.stderr)
        return 2
    name = "<stdin>" if args.package == "-" else args.package
    try:
        deployed = asyncio.run(_import(args, key, text))
    except DomainError as exc:
        problems = exc.problems or (Problem(exc.code, exc.message, exc.pointer),)
        for problem in problems:
            if problem.severity == "error":
                print(format_finding(name, problem))
        print(f"import: nothing deployed ({exc.code})", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        print(f"import: {exc}", file=sys.stderr)
        return 2
    for workflow in deployed:
        print(f"import: {workflow.path} v{workflow.version}", file=sys.stderr)
    return 0
