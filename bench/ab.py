"""Two versions of stateward side by side: server CPU per `performAction`, round by round.

On a shared two-core machine the load moves by ±20 % within minutes, more than most
changes do, so two whole `bench/api.py` runs one after the other cannot tell a 5 %
change from the host's drift. This bench keeps two servers alive at once — the
checkout's own code and a `--before` revision (`git archive REV stateward` into a
temporary folder, put first on that server's PYTHONPATH) — each on its own fresh SQLite
file, and drives them in alternating rounds (A B, B A, …; `--clients` keep-alive
connections of the lean client of `bench/_common.py`, each on its own instance, a
`$increment` self-effect as `bench/api.py`). Each round's figure is the server's CPU per
action (utime+stime of all its threads over the round ÷ actions); the result is the
ratio after ÷ before of each pair of neighbouring rounds, whose median is steady where
the medians of the two series are not.
Usage: `python bench/ab.py --before REV [--rounds N] [--seconds S] [--quick] [--json]`
(REV: any git revision of this checkout; `--json` prints one JSON object last).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Proc, load_average, login, start_stateward
from api import ACT, Target, prepare

ROOT = Path(__file__).resolve().parent.parent
WARM_SECONDS = 12.0  # past `serve`'s second heap freeze (10 s after start)


def export_revision(revision: str, folder: Path) -> str:
    """`git archive` of `revision`'s `stateward` package into `folder`; its commit id."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    archive = subprocess.run(
        ["git", "archive", commit, "stateward"], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return commit


async def compare(
    servers: list[Proc], folder: str, rounds: int, seconds: float, clients: int
) -> list[Target]:
    """Warm both servers, then `rounds` alternating rounds; the two targets' figures."""
    runs: list[tuple[Target, list[bytes], dict[str, str]]] = []
    for server, name in zip(servers, ("before", "after"), strict=True):
        token = await login(server.url, Path(folder) / f"{name}-operator.json")
        ids = await prepare(server.url, token, clients)
        bodies = [json.dumps({"query": ACT, "variables": {"i": i}}).encode() for i in ids]
        runs.append((Target(server, server.url), bodies, {"Authorization": f"Bearer {token}"}))
    for target, bodies, auth in runs:
        await target.round(clients, WARM_SECONDS, lambda i, n, b=bodies: b[i], auth)
        target.rates.clear()
        target.cpu_ms.clear()
        target.latencies.clear()
    for r in range(rounds):
        for target, bodies, auth in runs if r % 2 == 0 else runs[::-1]:
            await target.round(clients, seconds, lambda i, n, b=bodies: b[i], auth)
    return [target for target, _, _ in runs]


def figures(before: Target, after: Target) -> dict[str, Any]:
    """The per-round ratios and each series' median and range."""
    ratios = [b / a for a, b in zip(before.cpu_ms, after.cpu_ms, strict=True)]
    out: dict[str, Any] = {
        "cpu_ratio_after_vs_before": statistics.median(ratios),
        "cpu_ratio_range": [min(ratios), max(ratios)],
        "cpu_ratios": ratios,
    }
    for name, target in (("before", before), ("after", after)):
        out[f"{name}_server_ms_per_action"] = statistics.median(target.cpu_ms)
        out[f"{name}_server_ms_range"] = [min(target.cpu_ms), max(target.cpu_ms)]
        out[f"{name}_actions_per_s"] = statistics.median(target.rates)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; print a summary, and with `--json` one JSON object last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision to compare against")
    parser.add_argument("--rounds", type=int, default=12, help="rounds per server (12)")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds per round (4)")
    parser.add_argument("--clients", type=int, default=16, help="connections (16)")
    parser.add_argument("--quick", action="store_true", help="4 rounds of 2 s")
    parser.add_argument("--json", action="store_true", help="print a JSON object last")
    args = parser.parse_args(argv)
    rounds, seconds = (4, 2.0) if args.quick else (args.rounds, args.seconds)
    folder = tempfile.mkdtemp(prefix="stateward-ab-")
    servers: list[Proc] = []
    try:
        code = Path(folder) / "before-code"
        code.mkdir()
        commit = export_revision(args.before, code)
        load_before = load_average()
        servers = [
            start_stateward(folder, "before", {"PYTHONPATH": str(code)}),
            start_stateward(folder, "after"),
        ]
        before, after = asyncio.run(compare(servers, folder, rounds, seconds, args.clients))
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    result = {
        "before": commit,
        "rounds": rounds,
        "seconds": seconds,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        **figures(before, after),
    }
    print(
        f"server CPU per action, after / before (median of {rounds} round pairs): "
        f"{result['cpu_ratio_after_vs_before']:.3f} "
        f"[{result['cpu_ratio_range'][0]:.3f}–{result['cpu_ratio_range'][1]:.3f}]; "
        f"before {result['before_server_ms_per_action']:.3f} ms, "
        f"after {result['after_server_ms_per_action']:.3f} ms"
    )
    if args.json:
        print(
            json.dumps(
                {
                    k: [round(x, 3) for x in v]
                    if isinstance(v, list)
                    else round(v, 3)
                    if isinstance(v, float)
                    else v
                    for k, v in result.items()
                }
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
