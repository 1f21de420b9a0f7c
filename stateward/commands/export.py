"""`stateward export NAMESPACE [--out FILE|-] [--with-dependencies] [--db URL]`: write a
namespace's package.

The package (`{"format": "stateward.package/1", "namespace", "workflows", "modules"}`, see
`runtime.packages.export_package`) holds the latest version of every live workflow of the
namespace and of the namespaces below it, as authored, and the Starlark modules they may
call; with `--with-dependencies` also the workflows they spawn in other namespaces
(transitively). What it refers to but does not hold is listed under `dependencies` (and
on stderr). It goes to stdout (`--out -`, the default) or to FILE as indented JSON. Whoever can
open the database can read everything, so the export runs as the `system` actor.

Exit 0 when written; 1 when the namespace holds no workflow and no module (finding
`NAMESPACE: NOT_FOUND # ...` on stdout, no package written); 2 on bad usage (a malformed
namespace, an unwritable file, a database that cannot be opened).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from stateward.commands.runtime_args import cli_runtime
from stateward.commands.validate import format_finding
from stateward.domain.errors import NOT_FOUND, DomainError, Problem
from stateward.domain.model import SYSTEM_ACTOR
from stateward.domain.paths import is_namespace
from stateward.runtime.packages.transfer import export_package


async def _export(args: argparse.Namespace) -> dict[str, Any]:
    async with cli_runtime(args, register_node=False) as runtime:
        return await export_package(
            runtime, SYSTEM_ACTOR, args.namespace,
            with_dependencies=getattr(args, "with_dependencies", False),
        )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Export `args.namespace`; 0 written, 1 nothing to export, 2 bad usage."""
    if not is_namespace(args.namespace):
        print(f"export: {args.namespace!r} is not a namespace", file=sys.stderr)
        return 2
    try:
        package = asyncio.run(_export(args))
    except (DomainError, ValueError, OSError) as exc:
        print(f"export: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    if not package["workflows"] and not package["modules"]:
        empty = Problem(NOT_FOUND, f"namespace {args.namespace} has no workflows or modules", "")
        print(format_finding(args.namespace, empty))
        return 1
    text = json.dumps(package, indent=2, ensure_ascii=False) + "\n"
    if args.out in (None, "-"):
        sys.stdout.write(text)
    else:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"export: cannot write {args.out}: {exc}", file=sys.stderr)
            return 2
    count = (len(package["workflows"]), len(package["modules"]))
    print(f"export: {count[0]} workflow(s), {count[1]} module(s)", file=sys.stderr)
    for item in package.get("dependencies", []):
        print(f"export: depends on {item['kind']} {item['path']} (not in the package; "
              "--with-dependencies adds workflows)", file=sys.stderr)  # fmt: skip
    return 0
