"""API throughput: `performAction` over HTTP beside a bare Starlette insert, and live fan-out.

Measured in one run, every server in its own process on a fresh SQLite file:
1. `stateward serve` (memory bus): `performAction` mutations (a `$increment` self-effect,
   each worker on its own instances) from `--clients` concurrent HTTP connections for
   `--seconds`: actions/s, p50 and p99 latency.
2. A bare Starlette endpoint (uvicorn, same settings) inserting one row of the size of a
   stored event into the same kind of database (SQLite through the same engine setup):
   inserts/s. `ratio_vs_bare_starlette` = 1. / 2. (goal >= 0.40).
3. Event delivery: `--subscribers` websocket subscribers (graphql-transport-ws) on the
   stateward server; actions are performed one instance each; every subscriber must get
   every event: deliveries/s and p99 latency from sending the mutation to receipt.
4. `metrics_overhead`: two fresh `stateward serve` processes, one plain and one with
   `STATEWARD_METRICS=1` and OpenTelemetry tracing exporting over OTLP/HTTP to a local sink
   (a process that accepts and drops `/v1/traces`), measured in alternating rounds:
   actions/s observed ÷ plain (goal >= 0.9).
Usage: `python bench/api.py [--quick] [--json] [--only metrics_overhead]`; `--json`
prints one JSON object last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import websockets

LISTENING = re.compile(r"listening on (http://\S+)")
ROW_BYTES = 900  # about one stored event (envelope, signature, hashes) of this bench
COUNTER = {
    "$version": "2.0",
    "$path": "bench/api/counter",
    "initial": "open",
    "states": {"open": {"label": "Open"}, "closed": {"label": "Closed", "terminal": True}},
    "actions": {
        "bump": {"label": "Bump", "from": "open", "mutate": {"$increment": {"n": 1}}},
        "close": {"label": "Close", "from": "open", "to": "closed"},
    },
}
ACT = 'mutation($i:String!){performAction(instance:$i,action:"bump"){duplicate}}'


class Proc:
    """A server subprocess that prints `listening on URL` when ready."""

    def __init__(self, cmd: list[str], env: dict[str, str], cwd: str) -> None:
        self.proc = subprocess.Popen(
            cmd, cwd=cwd, env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.url = ""
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line.rstrip())
                found = LISTENING.search(line)
                if found and not self.url:
                    self.url = found.group(1)
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60) or not self.url:
            self.stop()
            raise RuntimeError("server did not start:\n" + "\n".join(self.lines[-30:]))

    def stop(self) -> None:
        """SIGTERM and wait."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# -- the bare Starlette server (runs in its own process) ---------------------------------


def bare_server(db: str) -> None:
    """`--bare-server`: POST /insert writes one row per request; prints its URL."""
    import uvicorn
    from sqlalchemy import text
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from stateward.persistence import create_engine

    engine = create_engine(db)

    async def insert(request: Request) -> JSONResponse:
        body = await request.json()
        async with engine.begin() as conn:
            result = await conn.execute(
                text("INSERT INTO rows (payload, created_at) VALUES (:p, :t) RETURNING id"),
                {"p": body["payload"], "t": time.time()},
            )
            row_id = result.scalar_one()
        return JSONResponse({"id": row_id})

    async def setup() -> None:
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                    "payload TEXT NOT NULL, created_at REAL NOT NULL)"
                )
            )

    asyncio.run(setup())
    app = Starlette(routes=[Route("/insert", insert, methods=["POST"])])
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"listening on http://127.0.0.1:{port}/insert", flush=True)
        await task

    asyncio.run(serve())


def otlp_sink() -> None:
    """`--otlp-sink`: accept OTLP/HTTP trace exports and drop them; prints its URL."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def traces(request: Request) -> Response:
        await request.body()
        return Response(b"", media_type="application/x-protobuf")

    app = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"listening on http://127.0.0.1:{port}", flush=True)
        await task

    asyncio.run(serve())


# -- load generation ---------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of `values` in milliseconds, 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def hammer(
    url: str, clients: int, seconds: float, body_for: Any, headers: dict[str, str]
) -> tuple[int, list[float]]:
    """`clients` workers POSTing for `seconds`; returns (completed, latencies in s)."""
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=30, limits=limits, headers=headers) as http:
        deadline = time.perf_counter() + seconds

        async def worker(index: int) -> None:
            n = 0
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                response = await http.post(url, json=body_for(index, n))
                body = response.json()
                if response.status_code != 200 or body.get("errors"):
                    raise RuntimeError(f"request failed: {body}")
                latencies.append(time.perf_counter() - started)
                n += 1

        await asyncio.gather(*(worker(i) for i in range(clients)))
    return len(latencies), latencies


async def gql(http: httpx.AsyncClient, url: str, query: str, variables: dict[str, Any]) -> Any:
    """`data` of a GraphQL request that must succeed."""
    body = (await http.post(url, json={"query": query, "variables": variables})).json()
    if body.get("errors"):
        raise RuntimeError(json.dumps(body["errors"]))
    return body["data"]


async def prepare(url: str, token: str, instances: int) -> list[str]:
    """Deploy the counter workflow and start `instances` instances."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:
        try:
            await gql(http, url, "mutation($d:JSON!){addWorkflow(definition:$d){path}}",
                      {"d": COUNTER})  # fmt: skip
        except RuntimeError as error:
            if "already" not in str(error).lower() and "exists" not in str(error).lower():
                raise
        start = 'mutation{startInstance(workflow:"bench/api/counter"){instanceId}}'
        ids = await asyncio.gather(*(gql(http, url, start, {}) for _ in range(instances)))
    return [d["startInstance"]["instanceId"] for d in ids]


async def bench_throughput(
    url: str, token: str, bare_url: str, clients: int, seconds: float, rounds: int
) -> dict[str, float]:
    """performAction (each worker on its own instance) and bare inserts, measured in
    alternating rounds so that a change in machine load hits both alike."""
    instances = await prepare(url, token, clients)
    auth = {"Authorization": f"Bearer {token}"}
    payload = "x" * ROW_BYTES

    def act(i: int, n: int) -> dict[str, Any]:
        return {"query": ACT, "variables": {"i": instances[i]}}

    def insert(i: int, n: int) -> dict[str, Any]:
        return {"payload": payload}

    await hammer(url, clients, 0.5, act, auth)  # warm-up
    await hammer(bare_url, clients, 0.5, insert, {})
    done = bare_done = 0
    spent = bare_spent = 0.0
    latencies: list[float] = []
    for _ in range(rounds):
        began = time.perf_counter()
        count, lat = await hammer(url, clients, seconds / rounds, act, auth)
        spent += time.perf_counter() - began
        done += count
        latencies += lat
        began = time.perf_counter()
        count, _ = await hammer(bare_url, clients, seconds / rounds, insert, {})
        bare_spent += time.perf_counter() - began
        bare_done += count
    actions = done / spent
    bare = bare_done / bare_spent
    return {
        "actions_per_s": actions,
        "p50_ms": percentile(latencies, 0.50),
        "p99_ms": percentile(latencies, 0.99),
        "bare_inserts_per_s": bare,
        "ratio_vs_bare_starlette": actions / bare,
    }


async def bench_delivery(url: str, token: str, subscribers: int, events: int) -> dict[str, float]:
    """Every subscriber receives every event; deliveries/s and p99 send->receipt latency."""
    instances = await prepare(url, token, events)
    ws_url = "ws" + url[len("http") :]
    sent: dict[str, float] = {}
    latencies: list[float] = []
    received = 0
    ready = 0
    all_ready = asyncio.Event()
    done = asyncio.Event()
    query = (
        'subscription{events(filter:{types:["workflow.updated"],namespace:"bench/api"})'
        "{cursor instanceId}}"
    )

    async def subscriber() -> None:
        nonlocal received, ready
        async with websockets.connect(
            ws_url, subprotocols=[websockets.Subprotocol("graphql-transport-ws")],
            max_queue=None,
        ) as ws:  # fmt: skip
            init = {"authorization": f"Bearer {token}"}
            await ws.send(json.dumps({"type": "connection_init", "payload": init}))
            await ws.recv()
            await ws.send(json.dumps({"id": "1", "type": "subscribe",
                                      "payload": {"query": query}}))  # fmt: skip
            ready += 1
            if ready == subscribers:
                all_ready.set()
            got = 0
            async for raw in ws:
                now = time.perf_counter()
                message = json.loads(raw)
                if message["type"] != "next":
                    continue
                instance = message["payload"]["data"]["events"]["instanceId"]
                latencies.append(now - sent[instance])
                received += 1
                got += 1
                if received == subscribers * events:
                    done.set()
                if got == events:
                    return

    tasks = []
    for _ in range(subscribers):  # connect in small batches (listen backlog)
        tasks.append(asyncio.create_task(subscriber()))
        if len(tasks) % 50 == 0:
            await asyncio.sleep(0.05)
    await asyncio.wait_for(all_ready.wait(), 60)
    await asyncio.sleep(0.5)  # every subscribe frame handled
    headers = {"Authorization": f"Bearer {token}"}
    began = time.perf_counter()
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:
        for instance in instances:
            sent[instance] = time.perf_counter()
            await gql(http, url, ACT, {"i": instance})
            await asyncio.sleep(0.01)
    try:
        await asyncio.wait_for(done.wait(), 60)
    finally:
        for task in tasks:
            task.cancel()
    elapsed = time.perf_counter() - began
    return {
        "subscribers": subscribers,
        "deliveries_per_s": received / elapsed,
        "delivery_p99_ms": percentile(latencies, 0.99),
        "delivery_p50_ms": percentile(latencies, 0.50),
    }


async def bench_overhead(
    plain: tuple[str, str], observed: tuple[str, str], clients: int, seconds: float, rounds: int
) -> dict[str, float]:
    """performAction on a plain and an observed server in alternating rounds."""
    ids = {url: await prepare(url, token, clients) for url, token in (plain, observed)}
    totals = {plain[0]: [0, 0.0], observed[0]: [0, 0.0]}

    async def run(url: str, token: str, span: float) -> tuple[int, float]:
        began = time.perf_counter()
        count, _ = await hammer(
            url, clients, span,
            lambda i, n: {"query": ACT, "variables": {"i": ids[url][i]}},
            {"Authorization": f"Bearer {token}"},
        )  # fmt: skip
        return count, time.perf_counter() - began

    for url, token in (plain, observed):
        await run(url, token, 0.5)  # warm-up
    for _ in range(rounds):
        for url, token in (plain, observed):
            count, spent = await run(url, token, seconds / rounds)
            totals[url][0] += count
            totals[url][1] += spent
    plain_rate = totals[plain[0]][0] / totals[plain[0]][1]
    observed_rate = totals[observed[0]][0] / totals[observed[0]][1]
    return {
        "plain_actions_per_s": plain_rate,
        "observed_actions_per_s": observed_rate,
        "metrics_overhead": observed_rate / plain_rate,
    }


def run_overhead(tmp: str, clients: int, seconds: float, rounds: int) -> dict[str, float]:
    """Start the sink and the two servers, measure, stop them."""
    procs: list[Proc] = []
    try:
        sink = Proc([sys.executable, __file__, "--otlp-sink"], {}, tmp)
        procs.append(sink)
        servers = []
        for name, extra in (
            ("plain", {}),
            ("observed", {"STATEWARD_METRICS": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url}),
        ):
            env = {
                "STATEWARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/{name}.db",
                "STATEWARD_OPERATOR_KEY_FILE": f"{tmp}/{name}-operator.json",
                "STATEWARD_BUS_URL": "memory://",
                **extra,
            }
            cmd = [sys.executable, "-m", "stateward.cli", "serve", "--port", "0"]
            procs.append(Proc(cmd, env, tmp))
            url = procs[-1].url
            servers.append((url, asyncio.run(login(url, Path(tmp) / f"{name}-operator.json"))))
        return asyncio.run(bench_overhead(servers[0], servers[1], clients, seconds, rounds))
    finally:
        for proc in procs:
            proc.stop()


async def login(url: str, key_file: Path) -> str:
    """A session token for the operator key (challenge signed with it)."""
    from stateward.governance.keys import read_key_file

    key = read_key_file(key_file)
    async with httpx.AsyncClient(timeout=30) as http:
        data = await gql(http, url, "mutation($k:String!){authChallenge(publicKey:$k){challenge}}",
                         {"k": key.public})  # fmt: skip
        challenge = data["authChallenge"]["challenge"]
        data = await gql(
            http, url,
            "mutation($k:String!,$c:String!,$s:String!){authLogin(publicKey:$k,challenge:$c,"
            "signature:$s){token}}",
            {"k": key.public, "c": challenge, "s": key.sign(challenge.encode())},
        )  # fmt: skip
    return str(data["authLogin"]["token"])


def main(argv: list[str] | None = None) -> int:
    """Run the three measurements; print a table (and a JSON line with `--json`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs (< 45 s)")
    parser.add_argument("--json", action="store_true", help="print a JSON object last")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--subscribers", type=int, default=500)
    parser.add_argument("--only", choices=["metrics_overhead"], help="run one measurement")
    parser.add_argument("--bare-server", metavar="DB_URL", help=argparse.SUPPRESS)
    parser.add_argument("--otlp-sink", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare_server:
        bare_server(args.bare_server)
        return 0
    if args.otlp_sink:
        otlp_sink()
        return 0
    seconds = 6.0 if args.quick else 30.0
    rounds = 2 if args.quick else 6
    events = 20 if args.quick else 100
    if args.only == "metrics_overhead":
        with tempfile.TemporaryDirectory(prefix="stateward-bench-") as tmp:
            result = run_overhead(tmp, args.clients, seconds, rounds)
        print_overhead(result, args.json)
        return 0
    with tempfile.TemporaryDirectory(prefix="stateward-bench-") as tmp:
        env = {
            "STATEWARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/api.db",
            "STATEWARD_OPERATOR_KEY_FILE": f"{tmp}/operator.json",
            "STATEWARD_BUS_URL": "memory://",
        }
        server = Proc([sys.executable, "-m", "stateward.cli", "serve", "--port", "0"], env, tmp)
        bare_db = f"sqlite+aiosqlite:///{tmp}/bare.db"
        try:
            bare = Proc([sys.executable, __file__, "--bare-server", bare_db], {}, tmp)
        except BaseException:
            server.stop()
            raise
        try:
            token = asyncio.run(login(server.url, Path(tmp) / "operator.json"))
            result = asyncio.run(
                bench_throughput(server.url, token, bare.url, args.clients, seconds, rounds)
            )
            bare.stop()
            result.update(asyncio.run(bench_delivery(server.url, token, args.subscribers, events)))
        finally:
            server.stop()
            bare.stop()
        result.update(run_overhead(tmp, args.clients, seconds, rounds))
    inserts = result["bare_inserts_per_s"]
    print(f"performAction over HTTP : {result['actions_per_s']:8.0f} actions/s  "
          f"p50 {result['p50_ms']:.1f} ms  p99 {result['p99_ms']:.1f} ms")  # fmt: skip
    print(f"bare Starlette insert   : {inserts:8.0f} rows/s")
    print(f"ratio                   : {result['ratio_vs_bare_starlette']:8.2f}  (goal >= 0.40)")
    print(f"delivery to {args.subscribers} subs  : {result['deliveries_per_s']:8.0f} deliveries/s"
          f"  p99 {result['delivery_p99_ms']:.1f} ms")  # fmt: skip
    print_overhead(result, args.json)
    return 0


def print_overhead(result: dict[str, float], as_json: bool) -> None:
    """The metrics_overhead line (and the JSON object of every figure)."""
    if "metrics_overhead" in result:
        print(f"metrics+tracing on/off  : {result['metrics_overhead']:8.2f}  (goal >= 0.9; "
              f"{result['observed_actions_per_s']:.0f} vs {result['plain_actions_per_s']:.0f}"
              " actions/s)")  # fmt: skip
    if as_json:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                          for k, v in result.items()}))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
