"""`stateward log export|restore|proof|consistency`: the deployment log as a file, and
its RFC 9162 proofs.

- `log export [--db URL] [--out FILE]` writes the whole log (JSON Lines, every signed
  envelope in log-index order, with its checkpoints; docs/log-format.md);
- `log restore --log FILE [--db URL]` rebuilds an EMPTY database (SQLite or PostgreSQL)
  by replaying every event through the one write path;
- `log proof PROCESS SEQ [--size N]` prints an event's inclusion proof as JSON;
- `log consistency FIRST [SECOND]` prints a consistency proof as JSON.
Exit 0 on success, 1 when the log cannot be restored or proven, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from typing import Any

from stateward.commands.runtime_args import cli_runtime, settings_from
from stateward.domain.errors import DomainError
from stateward.observe.progress import progress


def _line_text(line: dict[str, Any]) -> str:
    """One JSON Lines row of the export."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"


async def _export(args: argparse.Namespace) -> int:
    from stateward.runtime.insight.logfile import export_lines

    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")  # noqa: SIM115
    count = 0
    try:
        async with cli_runtime(args, register_node=False) as runtime:
            lines = export_lines(runtime)
            header = await anext(lines)
            out.write(_line_text(header))
            count = 1
            with progress("log export", total=int(header.get("size", 0))) as bar:
                async for line in lines:
                    out.write(_line_text(line))
                    count += 1
                    if "index" in line:
                        bar.advance()
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"exported {count} line(s)", file=sys.stderr)
    return 0


async def _restore(args: argparse.Namespace) -> int:
    from stateward.runtime.insight.logfile import read_log
    from stateward.runtime.insight.restore import restore

    report = await restore(settings_from(args), read_log(args.log))
    print(
        f"restored {report.events} event(s) and {report.checkpoints} checkpoint(s): "
        f"log size {report.size}, root {report.root}",
        file=sys.stderr,
    )
    return 0


def _proof_json(proof: Any) -> str:
    return json.dumps(dataclasses.asdict(proof), indent=2)


async def _proof(args: argparse.Namespace) -> int:
    from stateward.runtime.insight.proofs import event_proof

    async with cli_runtime(args, register_node=False) as runtime:
        print(_proof_json(await event_proof(runtime, args.process, args.seq, args.size)))
    return 0


async def _consistency(args: argparse.Namespace) -> int:
    from stateward.runtime.insight.proofs import consistency_proof

    async with cli_runtime(args, register_node=False) as runtime:
        print(_proof_json(await consistency_proof(runtime, args.first, args.second)))
    return 0


_ACTIONS = {
    "export": _export,
    "restore": _restore,
    "proof": _proof,
    "consistency": _consistency,
}


def run(args: argparse.Namespace) -> int:
    """Dispatch `log <action>`; domain errors are findings (1), bad files bad usage (2)."""
    try:
        return asyncio.run(_ACTIONS[args.log_command](args))
    except DomainError as exc:
        print(f"log {args.log_command}: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        print(f"log {args.log_command}: {exc}", file=sys.stderr)
        return 2
