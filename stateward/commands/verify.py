"""`stateward verify [PROCESS_ID] [--db URL]`: signatures, hash chains, replay.

Prints one line per finding on stdout, `process seq CODE message`, and a summary on
stderr. Exit 0 when everything verifies, 1 on any finding, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from stateward.commands.runtime_args import cli_runtime
from stateward.domain.errors import DomainError
from stateward.observe.progress import progress
from stateward.runtime.insight.verify import VerificationReport, verify


async def _verify(args: argparse.Namespace) -> VerificationReport:
    async with cli_runtime(args, register_node=False) as runtime:
        with progress("verify") as bar:

            def start(count: int) -> None:
                bar.total = count

            return await verify(runtime, args.process_id, on_start=start, on_process=bar.advance)


def run(args: argparse.Namespace) -> int:
    """Verify the log (one process or all); print findings; return the exit code."""
    try:
        report = asyncio.run(_verify(args))
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
