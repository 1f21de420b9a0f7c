"""Two versions of stateward side by side: server CPU per action, round by round.

On a shared two-core machine the load moves by ±20 % within minutes, more than most
changes do, so two whole `bench/api.py` runs one after the other cannot tell a 5 %
change from the host's drift. This bench keeps two servers alive at once — the
checkout's own code and a `--before` revision (`git archive REV stateward` into a
temporary folder, put first on that server's PYTHONPATH) — each on its own fresh SQLite
file, and drives them in alternating rounds (A B, B A, …; `--clients` keep-alive
connections of the lean client of `bench/_common.py`, each on its own instance, a
`$increment` self-effect as `bench/api.py`: `performAction`, or with `--op
submit-events` 4 connections posting `submitEvents` of 100 client-signed envelopes, signed
before the rounds; or with `--op read-instances` 4 connections reading the first page of
`instances` (`READ_PAGE`: 16 instances with their status and state, and the total), as a
dashboard polls it). Each round's figure is the server's CPU per action (utime+stime of
all its threads over the round ÷ actions, events or reads); the result is the ratio after ÷
before of each pair of neighbouring rounds, whose median is steady where the medians of
the two series are not.
Usage: `python bench/ab.py --before REV [--op perform-action|submit-events|read-instances]
[--rounds N] [--seconds S] [--after-env NAME=VALUE] [--quick] [--json]` (REV: any git
revision of this checkout; `--after-env` sets an environment variable of the after server
only, so `--before HEAD --after-env …` compares a setting on the same code; `--json`
prints one JSON object last).
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
from _common import Proc, env_pairs, gql, load_average, login, start_stateward
from api import ACT, COUNTER, Target, _signer, prepare, signed_batch, submit_many

ROOT = Path(__file__).resolve().parent.parent
WARM_SECONDS = 12.0  # past `serve`'s second heap freeze (10 s after start)


def export_revision(revision: str, folder: Path) -> str:
    """`git archive` of `revision`'s `stateward` package into `folder`; its commit id.
    A revision beginning with "-" is refused: git would read it as an option."""
    if revision.startswith("-"):
        raise ValueError(f"not a revision: {revision!r}")
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    archive = subprocess.run(
        ["git", "archive", commit, "stateward"], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return commit


#: Envelopes per `submitEvents` request, and its connections (as `bench/api.py`).
PER_REQUEST = 100
BATCH_CLIENTS = 4
#: `--op read-instances`: the page a dashboard polls, and its connections.
READ_PAGE = "{instances(first:20){totalCount nodes{id status state{key} updatedAt}}}"
READ_CLIENTS = 4


class _Workload:
    """One server's requests: the same `performAction` bodies every round, or
    `submitEvents` bodies signed before each round (enough for the round at 1.5 × the
    last round's rate), so signing never runs while a round is timed."""

    def __init__(self, server: Proc, folder: str, name: str, clients: int, op: str) -> None:
        self.target = Target(server, server.url)
        self.key_file = Path(folder) / f"{name}-operator.json"
        self.clients, self.batches, self.reads = (
            clients,
            op == "submit-events",
            op == "read-instances",
        )
        self.headers: dict[str, str] = {}
        self.bodies: list[bytes] = []
        self.sign: Any = None
        self.ids: list[str] = []

    async def prepare(self) -> None:
        url = self.target.url
        token = await login(url, self.key_file)
        self.ids = await prepare(url, token, self.clients)
        if self.batches:
            net = (await gql(url, "{net}", {}, token))["net"]
            self.sign = _signer(self.key_file, net, COUNTER["$path"])
        elif self.reads:
            self.bodies = [json.dumps({"query": READ_PAGE}).encode()]
            self.headers = {"Authorization": f"Bearer {token}"}
        else:
            self.bodies = [json.dumps({"query": ACT, "variables": {"i": i}}).encode()
                           for i in self.ids]  # fmt: skip
            self.headers = {"Authorization": f"Bearer {token}"}

    async def round(self, seconds: float) -> None:
        if self.reads:
            body = self.bodies[0]
            await self.target.round(READ_CLIENTS, seconds, lambda i, n: body, self.headers)
            return
        if not self.batches:
            bodies = self.bodies
            await self.target.round(self.clients, seconds, lambda i, n: bodies[i], self.headers)
            return
        rate = self.target.rates[-1] if self.target.rates else 6000.0
        count = int(rate * seconds * 1.5 / PER_REQUEST) + BATCH_CLIENTS
        pending = iter([submit_many(signed_batch(self.sign, self.ids, n, PER_REQUEST))
                        for n in range(count)])  # fmt: skip
        await self.target.round(BATCH_CLIENTS, seconds, lambda i, n: next(pending, None), {},
                                per_request=PER_REQUEST)  # fmt: skip


async def compare(
    servers: list[Proc], folder: str, rounds: int, seconds: float, clients: int, op: str
) -> list[Target]:
    """Warm both servers, then `rounds` alternating rounds; the two targets' figures."""
    loads = [_Workload(server, folder, name, clients, op)
             for server, name in zip(servers, ("before", "after"), strict=True)]  # fmt: skip
    for load in loads:
        await load.prepare()
    for load in loads:
        await load.round(WARM_SECONDS)
        load.target.cpu_ms.clear()
        load.target.latencies.clear()
    for r in range(rounds):
        for load in loads if r % 2 == 0 else loads[::-1]:
            await load.round(seconds)
    for load in loads:
        del load.target.rates[0]  # the warm-up's (kept until now to size the first round)
    return [load.target for load in loads]


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
    parser.add_argument(
        "--op", choices=("perform-action", "submit-events", "read-instances"),
        default="perform-action",
        help="what each request does (perform-action)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=12, help="rounds per server (12)")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds per round (4)")
    parser.add_argument("--clients", type=int, default=16, help="connections (16)")
    parser.add_argument(
        "--after-env", action="append", default=[], metavar="NAME=VALUE",
        help="an environment variable of the after server only (repeatable): with "
        "`--before HEAD`, a setting compared with the same code",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="4 rounds of 2 s")
    parser.add_argument("--json", action="store_true", help="print a JSON object last")
    args = parser.parse_args(argv)
    rounds, seconds = (4, 2.0) if args.quick else (args.rounds, args.seconds)
    try:
        after_env = env_pairs(args.after_env)
    except ValueError as error:
        parser.error(f"--after-env: {error}")
    folder = tempfile.mkdtemp(prefix="stateward-ab-")
    servers: list[Proc] = []
    try:
        code = Path(folder) / "before-code"
        code.mkdir()
        commit = export_revision(args.before, code)
        load_before = load_average()
        servers = [
            start_stateward(folder, "before", {"PYTHONPATH": str(code)}),
            start_stateward(folder, "after", after_env),
        ]
        before, after = asyncio.run(
            compare(servers, folder, rounds, seconds, args.clients, args.op)
        )
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    result = {
        "before": commit,
        "after_env": after_env,
        "op": args.op,
        "rounds": rounds,
        "seconds": seconds,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        **figures(before, after),
    }
    unit = {"perform-action": "action", "submit-events": "event"}.get(args.op, "read")
    print(
        f"server CPU per {unit}, after / before (median of {rounds} round pairs): "
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
