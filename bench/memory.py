"""Memory under steady delivery: server RSS growth per 10,000 subscriber deliveries.

One `stateward serve` process (fresh SQLite file, memory bus), `--subscribers` websocket
subscribers (graphql-transport-ws) on `events`, and `performAction` bumps from 4 HTTP
clients. After a warm-up, the server's RSS (/proc/PID/status VmRSS) is sampled every
`--step` events; the slope of a least-squares line over the samples (KB per 10,000
deliveries) is the growth (goal <= 2 MB). Then every subscriber closes and the RSS is
sampled again (`rss_after_close_mb`): memory held per subscription must go back.
Usage: `python bench/memory.py [--quick] [--json] [--events N] [--subscribers S]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).parent))
from _common import Connection, Proc, login
from api import ACT, prepare

QUERY = 'subscription{events(filter:{namespace:"bench/api"}){cursor instanceId process seq}}'


def rss_kb(pid: int) -> int:
    """Resident set size of `pid` in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope dy/dx of `points`."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return sxy / sxx if sxx else 0.0


async def run(url: str, pid: int, token: str, subscribers: int, events: int, step: int,
              warmup: int) -> dict[str, float]:  # fmt: skip
    """Drive the load; returns the measurements."""
    instances = await prepare(url, token, 4)
    ws_url = "ws" + url[len("http") :]
    received = [0] * subscribers
    ready = asyncio.Event()
    connected = 0

    async def subscriber(index: int) -> None:
        nonlocal connected
        async with websockets.connect(
            ws_url, subprotocols=[websockets.Subprotocol("graphql-transport-ws")], max_queue=None
        ) as ws:
            init = {"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}}
            await ws.send(json.dumps(init))
            await ws.recv()
            await ws.send(json.dumps({"id": "1", "type": "subscribe",
                                      "payload": {"query": QUERY}}))  # fmt: skip
            connected += 1
            if connected == subscribers:
                ready.set()
            async for raw in ws:
                if json.loads(raw)["type"] == "next":
                    received[index] += 1

    tasks = [asyncio.create_task(subscriber(i)) for i in range(subscribers)]
    await asyncio.wait_for(ready.wait(), 60)
    await asyncio.sleep(0.5)
    headers = {"Authorization": f"Bearer {token}"}
    sent = 0

    async def send(count: int) -> None:
        nonlocal sent

        async def worker(i: int) -> None:
            nonlocal sent
            conn = Connection(url, headers)
            body = json.dumps({"query": ACT, "variables": {"i": instances[i]}}).encode()
            try:
                for _ in range(count // 4):
                    status, answer = await conn.post(body)
                    if status != 200 or b'"errors"' in answer:
                        raise RuntimeError(answer[:300])
                    sent += 1
            finally:
                conn.close()

        await asyncio.gather(*(worker(i) for i in range(4)))

    async def drained(deadline: float = 120.0) -> None:
        end = time.monotonic() + deadline
        while min(received) < sent:
            if time.monotonic() > end:
                raise RuntimeError(f"deliveries stalled: {min(received)} of {sent}")
            await asyncio.sleep(0.05)

    await send(warmup)
    await drained()
    samples: list[tuple[float, float]] = []
    began = time.perf_counter()
    base = sum(received)
    samples.append((0.0, float(rss_kb(pid))))
    for _ in range(events // step):
        await send(step)
        await drained()
        samples.append((float(sum(received) - base), float(rss_kb(pid))))
    elapsed = time.perf_counter() - began
    deliveries = sum(received) - base
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(3.0)  # the server notices the closed sockets and drops them
    return {
        "subscribers": subscribers,
        "deliveries": deliveries,
        "deliveries_per_s": deliveries / elapsed,
        "rss_start_mb": samples[0][1] / 1024,
        "rss_end_mb": samples[-1][1] / 1024,
        "rss_after_close_mb": rss_kb(pid) / 1024,
        "growth_kb_per_10k_deliveries": slope(samples) * 10_000,
    }


def main(argv: list[str] | None = None) -> int:
    """Start the server, measure, print a summary (and a JSON line with `--json`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a shorter run (about 1 min)")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--subscribers", type=int, default=36)
    parser.add_argument("--events", type=int, default=0, help="events measured (after warm-up)")
    args = parser.parse_args(argv)
    events = args.events or (1200 if args.quick else 4000)
    step = max(40, events // 10)
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "STATEWARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/memory.db",
            "STATEWARD_BUS_URL": "memory://",
            "STATEWARD_OPERATOR_KEY_FILE": f"{tmp}/operator.json",
        }
        cmd = [sys.executable, "-m", "stateward.cli", "serve", "--port", "0"]
        server = Proc(cmd, env, tmp)
        try:
            token = asyncio.run(login(server.url, Path(tmp) / "operator.json"))
            result = asyncio.run(
                run(server.url, server.proc.pid, token, args.subscribers, events, step,
                    warmup=max(200, events // 5))
            )  # fmt: skip
        finally:
            server.stop()
    for key, value in result.items():
        print(f"{key:32} {value:,.2f}" if isinstance(value, float) else f"{key:32} {value}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
