"""Request limits under attack: how fast hostile documents are refused, and /healthz meanwhile.

One `stateward serve` process (fresh SQLite file, memory bus), measured over HTTP:
- `fanout_reject_ms`: the 856-byte anonymous query of 21 fragments, each spreading the
  previous one twice (2^21 fields once expanded), refused with QUERY_TOO_COMPLEX;
- `token_reject_ms`: a 100,000-token document refused by the token limit (5,000);
- `trivial_ms`: `{ net }`, for scale;
- `healthz_during_attack_ms`: the worst `/healthz` latency while 4 clients send the fan-out
  query in a loop for 5 s (2 s with `--quick`).
Each latency is the median of `--repeat` requests (odd; the min and max are printed too).
Goals (issue 9): each rejection under 100 ms, `/healthz` under 250 ms.
Usage: `python bench/limits.py [--quick] [--json]`; `--json` prints one JSON object last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import start_stateward


def fanout_query(levels: int = 21) -> str:
    """`fragment Fi on Query { ...F(i-1) ...F(i-1) }` for i = 1..levels."""
    parts = ["fragment F0 on Query { net }"]
    parts += [f"fragment F{i} on Query {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, levels + 1)]
    return f"query {{ ...F{levels} }}\n" + "\n".join(parts)


def token_flood(tokens: int = 100_000) -> str:
    """A document of `tokens` lexical tokens."""
    return "{ " + "net " * (tokens - 2) + "}"


async def timed_post(http: httpx.AsyncClient, url: str, query: str, code: str | None) -> float:
    """Milliseconds for one POST; checks the first error code (None: no errors)."""
    started = time.perf_counter()
    response = await http.post(url, json={"query": query})
    elapsed = (time.perf_counter() - started) * 1000
    body = response.json()
    got = body["errors"][0]["extensions"]["code"] if body.get("errors") else None
    if got != code:
        raise RuntimeError(f"expected {code}, got {body}")
    return elapsed


async def measure(http: httpx.AsyncClient, url: str, query: str, code: str | None, n: int):
    """(median, min, max) milliseconds of `n` requests after one warm-up."""
    await timed_post(http, url, query, code)
    times = [await timed_post(http, url, query, code) for _ in range(n)]
    return statistics.median(times), min(times), max(times)


async def healthz_under_attack(url: str, seconds: float, clients: int = 4) -> float:
    """Worst /healthz latency (ms) while `clients` send the fan-out query for `seconds`."""
    base = url.rsplit("/graphql", 1)[0]
    query = fanout_query(21)
    stop = asyncio.Event()

    async def attacker(http: httpx.AsyncClient) -> None:
        while not stop.is_set():
            await timed_post(http, url, query, "QUERY_TOO_COMPLEX")

    worst = 0.0
    async with httpx.AsyncClient(timeout=60) as attack, httpx.AsyncClient(timeout=60) as probe:
        tasks = [asyncio.create_task(attacker(attack)) for _ in range(clients)]
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                started = time.perf_counter()
                response = await probe.get(base + "/healthz")
                response.raise_for_status()
                worst = max(worst, (time.perf_counter() - started) * 1000)
                await asyncio.sleep(0.02)
        finally:
            stop.set()
            await asyncio.gather(*tasks)
    return worst


async def run(quick: bool, repeat: int) -> dict[str, Any]:
    """All four measurements against one fresh server."""
    with tempfile.TemporaryDirectory(prefix="stateward-limits-") as folder:
        server = start_stateward(folder, "limits")
        try:
            async with httpx.AsyncClient(timeout=60) as http:
                fan = await measure(http, server.url, fanout_query(21), "QUERY_TOO_COMPLEX", repeat)
                tok = await measure(http, server.url, token_flood(), "GRAPHQL_PARSE_FAILED", repeat)
                triv = await measure(http, server.url, "{ net }", None, repeat)
            worst = await healthz_under_attack(server.url, 2.0 if quick else 5.0)
        finally:
            server.stop()
    out: dict[str, Any] = {}
    for name, (median, low, high) in (("fanout_reject_ms", fan), ("token_reject_ms", tok),
                                       ("trivial_ms", triv)):  # fmt: skip
        out[name] = round(median, 2)
        out[f"{name}_min"] = round(low, 2)
        out[f"{name}_max"] = round(high, 2)
    out["healthz_during_attack_ms"] = round(worst, 2)
    out["goals_met"] = (
        out["fanout_reject_ms"] < 100
        and out["token_reject_ms"] < 100
        and out["healthz_during_attack_ms"] < 250
    )
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the measurements; print a table (and a JSON line with `--json`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter run (about 15 s)")
    parser.add_argument("--json", action="store_true", help="print a JSON object last")
    parser.add_argument("--repeat", type=int, default=None, help="requests per median")
    args = parser.parse_args(argv)
    repeat = args.repeat or (5 if args.quick else 11)
    result = asyncio.run(run(args.quick, repeat))
    for key in ("fanout_reject_ms", "token_reject_ms", "trivial_ms"):
        print(f"{key:26} {result[key]:8.2f}  (min {result[key + '_min']:.2f}, "
              f"max {result[key + '_max']:.2f}, n={repeat})")  # fmt: skip
    print(f"{'healthz_during_attack_ms':26} {result['healthz_during_attack_ms']:8.2f}  (worst)")
    print(f"goals met: {result['goals_met']}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
