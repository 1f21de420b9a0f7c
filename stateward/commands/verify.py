"""`stateward verify [PROCESS_ID] [--db URL] [--log FILE] [--checkpoint CP.json]`.

With `--db` (the default database): signatures, hash chains and replay of every process
(or one), and — for the whole database — the deployment log: gap-free indexes, stored
leaves and head, every kept checkpoint and, with `--checkpoint`, that the log still
contains a checkpoint saved earlier. With `--log FILE`: the same checks on an exported
log with no database at all. Prints one line per finding on stdout, `process seq CODE
message` (`log INDEX CODE message` for the log itself), and a summary on stderr.
Exit 0 when everything verifies, 1 on any finding, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from stateward.commands.runtime_args import cli_runtime
from stateward.domain.errors import DomainError
from stateward.governance.checkpoint import SignedCheckpoint, parse_checkpoint
from stateward.observe.progress import progress
from stateward.runtime.insight.verify import VerificationReport, verify


def _checkpoint(path: str | None) -> SignedCheckpoint | None:
    if path is None:
        return None
    with open(path, encoding="utf-8") as handle:
        return parse_checkpoint(json.load(handle))


async def _verify_db(
    args: argparse.Namespace, given: SignedCheckpoint | None
) -> VerificationReport:
    from stateward.runtime.insight.logverify import verify_database

    async with cli_runtime(args, register_node=False) as runtime:
        with progress("verify") as bar:

            def start(count: int) -> None:
                bar.total = count

            if args.process_id is not None:
                return await verify(
                    runtime, args.process_id, on_start=start, on_process=bar.advance
                )
            return await verify_database(runtime, given, on_start=start, on_process=bar.advance)


def _verify_file(path: str, given: SignedCheckpoint | None) -> VerificationReport:
    from stateward.runtime.insight.logfile import read_log
    from stateward.runtime.insight.logverify import verify_log

    return verify_log(read_log(path), given)


def run(args: argparse.Namespace) -> int:
    """Verify the database or an exported log; print findings; return the exit code."""
    try:
        given = _checkpoint(args.checkpoint)
        if args.log is not None:
            if args.db is not None or args.process_id is not None:
                raise ValueError("--log verifies a file: give no --db and no PROCESS_ID")
            report = _verify_file(args.log, given)
        else:
            report = asyncio.run(_verify_db(args, given))
    except (DomainError, ValueError, OSError) as exc:
        print(f"verify: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    for problem in report.problems:
        print(problem.line())
    print(
        f"verified {report.events_checked} event(s) of {report.processes_checked} "
        f"process(es): {len(report.problems)} problem(s)",
        file=sys.stderr,
    )
    return 0 if report.valid else 1
