"""API throughput and delivery, each measured beside an honest baseline in the same run.

Every server runs in its own process on a fresh SQLite file; load comes from the lean
asyncio HTTP/1.1 client of `bench/_common.py` (~0.1 ms CPU per request), and every HTTP
figure comes with the server's CPU per request (its utime+stime over the requests, read
from /proc/PID/stat: the steadiest figure on a shared machine), and the event loop's
thread alone (`loop_ms_per_action`, `batch_loop_ms_per_event`; `loop_busy`,
`batch_loop_busy`: its CPU ÷ the round's wall time — below 1 while the rate is bound by
the writer's waits, not by the one thread that runs every request's Python). Figures are
the median of `--rounds` alternating rounds (min–max printed beside), with the load
average and `steal_share` (the machine's CPU time the hypervisor gave other guests
during the run, from /proc/stat: a slow run on a shared virtual machine shows there).

1. `performAction` (a `$increment` self-effect, each client on its own instance) from
   `--clients` keep-alive connections: actions/s, server ms/action, p50/p99.
2. The bare baseline: a Starlette endpoint (same uvicorn options) that parses the JSON and
   writes the same three rows as an action — the process update, the event (≈ 900 bytes)
   and the outbox row — behind one writer task with the same batching (up to 64 requests
   per transaction, answered after the commit), on SQLAlchemy's stock aiosqlite cursor
   with stateward's PRAGMAs. `ratio_vs_bare` = 1. / 2. (goal ≥ 0.8).
3. `submitEvent`: client-signed envelopes (signed before each round); `submit_per_s`.
4. `submitEvents`: 100 client-signed envelopes per request; `batch_submit_per_s` (events/s;
   null when the server has no `submitEvents`). Then the same with 10 of each request's
   100 envelopes sent before (a client catching up after a lost answer):
   `batch_resubmit_per_s` (events/s, resent ones included) and its server ms per event.
5. Delivery to `--subscribers` and twice that many graphql-transport-ws subscribers at a
   steady offered load below capacity (`--offered` deliveries/s, i.e. offered/subscribers
   events/s): p50/p99 from sending the mutation to receipt (`delivery_p99_ms_500`,
   `delivery_p99_ms_1000`; `delivery_spread_p99_ms_N`: the same deliveries' delay after
   each event's first delivery, the fan-out's own part); then the capacity (a burst
   of events, 32 actions or publishes in flight, deliveries/s until all arrived) beside
   a raw websocket broadcast of frames of the same shape to the same number of clients
   on the same uvicorn stack: `delivery_ratio_vs_raw`; with the server's
   and this client's CPU per delivery at capacity for both (`capacity_server_us_N`,
   `raw_capacity_server_us_N`, `capacity_client_us_N`, `raw_capacity_client_us_N`).
   The subscribers are lean asyncio websocket clients in this one process (a few µs of
   CPU per frame, receipt timed per socket read), so the p99 of one event to 1,000
   sockets is the servers' fan-out, not this client working through 1,000 frames.
6. `metrics_overhead` (not with `--quick`): a plain and an observed (`STATEWARD_METRICS=1`,
   OTLP tracing to a local sink, the default sampler: one request in ten) server in
   alternating rounds (goal ≥ 0.9); `metrics_overhead_cpu` is the same ratio of server CPU
   per action (plain ÷ observed), steadier on a shared box. A third server traces every
   request (`STATEWARD_TRACE_SAMPLE_RATIO=1`): `metrics_overhead_all`,
   `metrics_overhead_cpu_all` (for reading, not the goal).
Usage: `python bench/api.py [--quick] [--json] [--only throughput|delivery|metrics_overhead]
[--server-env NAME=VALUE]`; `--json` prints one JSON object last (with `server_env`).
`--server-env` sets an environment variable of the stateward server of 1.–5. (not of the
baselines, nor of 6.'s servers): `--server-env STATEWARD_SERVER_CPUS=1` measures the
one-box setup, the server kept on CPU 1 (`commands/affinity.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    Connection,
    Proc,
    cpu_counters,
    env_pairs,
    gql,
    hammer,
    load_average,
    login,
    median_range,
    percentile,
    start_stateward,
    steal_share,
)

EVENT_BYTES = 900  # about one stored event (envelope, signature, hashes) of this bench
OUTBOX_BYTES = 300
MAX_BATCH = 64  # as the group committer
#: Actions (or raw publishes) in flight in the delivery test's capacity burst: enough that
#: the group commit batches them and the fan-out, not one action's round trip, is the
#: bound (with 8 the rate at 500 subscribers followed the box's commit latency).
BURST = 32
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
ACT = 'mutation($i:ID!){performAction(instance:$i,action:"bump"){duplicate}}'
SUBMIT = (
    "mutation($e:JSON!,$s:String!,$k:String!)"
    "{submitEvent(event:$e,signature:$s,signer:$k){duplicate}}"
)
SUBMIT_MANY = "mutation($l:[SignedEventInput!]!){submitEvents(events:$l){duplicate error{code}}}"
SUBSCRIBE = (
    'subscription{events(filter:{types:["workflow.updated"],namespace:"bench/api"})'
    "{cursor instanceId}}"
)


# -- the baselines (each runs in its own process) ----------------------------------------


def _serve(app: Any, path: str) -> None:
    """Run `app` with stateward's own uvicorn options on a free port; print its URL."""
    import uvicorn

    from stateward.commands import serve as serving
    from stateward.settings import Settings

    uvicorn_options = serving.uvicorn_options
    factory = getattr(serving, "loop_factory", lambda: None)()  # the loop stateward runs on

    options = uvicorn_options(Settings.from_env(port=0))
    options.update(lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(uvicorn.Config(app, **options))

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        freeze = getattr(serving, "freeze_heap", None)  # like-for-like: as `serve` does
        if freeze is not None:
            freeze()
        print(f"listening on http://127.0.0.1:{port}{path}", flush=True)
        await task

    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve())


def bare_server(db: str) -> None:
    """`--bare-server DB`: POST /act writes a process update, an event and an outbox row,
    batched by one writer task (up to 64 per transaction), answered after the commit."""
    from sqlalchemy import text
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from stateward.persistence import create_engine

    # SQLAlchemy's own aiosqlite cursor and BEGIN, with stateward's PRAGMAs: a plain
    # application on the same libraries and settings; stateward's driver work
    # (`persistence/onehop.py`) is part of what is measured, not of the yardstick
    # (docs/decisions.md, "The bare baseline keeps the stock driver path").
    engine = create_engine(db, sqlite_one_hop=False)
    queue: asyncio.Queue[tuple[str, asyncio.Future[int]]] = asyncio.Queue()
    event_body = "e" * EVENT_BYTES
    outbox_body = "o" * OUTBOX_BYTES
    update = text(
        "UPDATE processes SET seq = seq + 1, data = :d, updated_at = :t WHERE id = :id "
        "RETURNING seq"
    )
    add_event = text("INSERT INTO events (process, seq, body, hash) VALUES (:p, :s, :b, :h)")
    add_outbox = text("INSERT INTO outbox (type, payload) VALUES ('workflow.updated', :b)")

    async def writer() -> None:
        while True:
            items = [await queue.get()]
            while len(items) < MAX_BATCH and not queue.empty():
                items.append(queue.get_nowait())
            async with engine.begin() as conn:
                seqs = []
                for process, _ in items:
                    seq = (await conn.execute(update, {"d": '{"n": 1}', "t": time.time(),
                                                       "id": process})).scalar_one()  # fmt: skip
                    await conn.execute(add_event, {"p": process, "s": seq, "b": event_body,
                                                   "h": uuid.uuid4().hex * 2})  # fmt: skip
                    await conn.execute(add_outbox, {"b": outbox_body})
                    seqs.append(seq)
            for (_, future), seq in zip(items, seqs, strict=True):
                future.set_result(seq)

    known: set[str] = set()
    started: list[asyncio.Task[None]] = []

    async def act(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        process = body["variables"]["i"]
        if not started:
            started.append(asyncio.get_running_loop().create_task(writer()))
        if process not in known:  # each client's process row, created once
            known.add(process)
            async with engine.begin() as conn:
                await conn.execute(
                    text("INSERT OR IGNORE INTO processes (id, seq, data, updated_at) "
                         "VALUES (:id, 0, '{}', 0)"), {"id": process},
                )  # fmt: skip
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        await queue.put((process, future))
        seq = await future
        return JSONResponse({"data": {"performAction": {"duplicate": False, "seq": seq}}})

    async def setup() -> None:
        async with engine.begin() as conn:
            for ddl in (
                "CREATE TABLE processes (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
                "data TEXT NOT NULL, updated_at REAL NOT NULL)",
                "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, process TEXT "
                "NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, hash TEXT NOT NULL, "
                "UNIQUE (process, seq))",
                "CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT "
                "NOT NULL, payload TEXT NOT NULL)",
            ):
                await conn.execute(text(ddl))

    asyncio.run(setup())
    _serve(Starlette(routes=[Route("/act", act, methods=["POST"])]), "/act")


def raw_server() -> None:
    """`--raw-server`: websockets on /ws; POST /publish sends its body as one text frame to
    every connected socket (the raw broadcast baseline)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    sockets: set[WebSocket] = set()

    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        sockets.add(socket)
        try:
            while True:
                await socket.receive_text()
        except WebSocketDisconnect:
            pass
        finally:
            sockets.discard(socket)

    async def broadcast(frame: str) -> None:
        for socket in list(sockets):
            try:
                await socket.send_text(frame)
            except Exception:
                sockets.discard(socket)

    async def publish(request: Request) -> Response:
        frame = (await request.body()).decode()
        task = asyncio.get_running_loop().create_task(broadcast(frame))
        pending.add(task)
        task.add_done_callback(pending.discard)
        return Response(b"{}", media_type="application/json")

    pending: set[asyncio.Task[None]] = set()
    app = Starlette(
        routes=[Route("/publish", publish, methods=["POST"]), WebSocketRoute("/ws", ws)]
    )
    _serve(app, "/publish")


def otlp_sink() -> None:
    """`--otlp-sink`: accept OTLP/HTTP trace exports and drop them; prints its URL."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def traces(request: Request) -> Response:
        await request.body()
        return Response(b"", media_type="application/x-protobuf")

    _serve(Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])]), "")


# -- throughput --------------------------------------------------------------------------


async def prepare(url: str, token: str, instances: int) -> list[str]:
    """Deploy the counter workflow (once) and start `instances` instances."""
    try:
        await gql(url, "mutation($d:JSON!){addWorkflow(definition:$d){path}}", {"d": COUNTER},
                  token)  # fmt: skip
    except RuntimeError as error:
        if "already" not in str(error).lower() and "exists" not in str(error).lower():
            raise
    start = 'mutation{startInstance(workflow:"bench/api/counter"){instanceId}}'
    ids: list[str] = []
    for chunk in range(0, instances, 16):
        done = await asyncio.gather(
            *(gql(url, start, {}, token) for _ in range(min(16, instances - chunk)))
        )
        ids += [d["startInstance"]["instanceId"] for d in done]
    return ids


class Target:
    """A server and what one round against it measured."""

    def __init__(self, proc: Proc, url: str) -> None:
        self.proc, self.url = proc, url
        self.rates: list[float] = []
        self.cpu_ms: list[float] = []
        #: The event loop's thread alone: CPU ms per unit, and its busy share of the round.
        self.loop_ms: list[float] = []
        self.loop_busy: list[float] = []
        self.latencies: list[float] = []

    async def round(self, clients: int, seconds: float, body_for: Any, headers: Any,
                    per_request: int = 1) -> None:  # fmt: skip
        """One timed run; `per_request` units (events) per request."""
        cpu, loop, began = self.proc.cpu(), self.proc.loop_cpu(), time.perf_counter()
        count, latencies = await hammer(self.url, clients, seconds, body_for, headers)
        elapsed, spent = time.perf_counter() - began, self.proc.cpu() - cpu
        looped = self.proc.loop_cpu() - loop
        units = count * per_request
        self.rates.append(units / elapsed)
        self.cpu_ms.append(spent * 1000 / max(units, 1))
        self.loop_ms.append(looped * 1000 / max(units, 1))
        self.loop_busy.append(looped / elapsed)
        self.latencies += latencies


def signed_batch(sign: Any, instances: list[str], n: int, size: int = 100) -> list[Any]:
    """The `n`-th request's envelopes: `size` signed bumps, one instance after another."""
    return [sign(instances[(n * 100 + j) % len(instances)]) for j in range(size)]


def submit_many(items: list[Any]) -> bytes:
    """The body of one `submitEvents` request of `items`."""
    return json.dumps({"query": SUBMIT_MANY, "variables": {"l": items}}).encode()


def _signer(key_file: Path, net: str, workflow: str) -> Any:
    """A function giving `n` signed `bump` envelopes for `instance` (operator key)."""
    from stateward.client.signing import Key, envelope, sign_envelope

    key = Key.from_file(key_file)

    def signed(instance: str) -> dict[str, Any]:
        return sign_envelope(envelope(net, instance, "bump", workflow, {}, key.public), key)

    return signed


async def bench_throughput(
    server: Proc, bare: Proc, token: str, key_file: Path, clients: int, seconds: float,
    rounds: int,
) -> dict[str, Any]:  # fmt: skip
    """performAction / bare / submitEvent / submitEvents in alternating rounds."""
    url = server.url
    instances = await prepare(url, token, clients)
    net = (await gql(url, "{net}", {}, token))["net"]
    sign = _signer(key_file, net, COUNTER["$path"])
    auth = {"Authorization": f"Bearer {token}"}
    acts = [json.dumps({"query": ACT, "variables": {"i": i}}).encode() for i in instances]
    stateward, baseline = Target(server, url), Target(bare, bare.url)
    submit, batch = Target(server, url), Target(server, url)
    resubmit = Target(server, url)
    batch_supported = True
    sent: list[dict[str, Any]] = []  # envelopes of the batch rounds (resent later)

    def pool(count: int) -> list[bytes]:  # client-signed submitEvent bodies, signed up front
        bodies = []
        for n in range(count):
            s = sign(instances[n % len(instances)])
            variables = {"e": s["event"], "s": s["signature"], "k": s["signer"]}
            bodies.append(json.dumps({"query": SUBMIT, "variables": variables}).encode())
        return bodies

    def batches(count: int, resent: int = 0) -> list[bytes]:  # 100 envelopes per request
        out = []
        for n in range(count):
            items = signed_batch(sign, instances, n, 100 - resent)
            if resent:  # spread over the request, from the envelopes applied before
                for k in range(resent):
                    items.insert(k * 100 // resent, sent[(n * resent + k) * 7919 % len(sent)])
            else:
                sent.extend(items[:: max(1, 100 // 20)])  # a sample to resend later
            out.append(submit_many(items))
        return out

    async def warm() -> None:
        await hammer(url, clients, 0.5, lambda i, n: acts[i], auth)
        await hammer(bare.url, clients, 0.5, lambda i, n: acts[i], {})

    await warm()
    nonlocal_batch = [batch_supported]
    for _ in range(rounds):
        await stateward.round(clients, seconds, lambda i, n: acts[i], auth)
        await baseline.round(clients, seconds, lambda i, n: acts[i], {})
        bodies = pool(int(max(stateward.rates[-1], 50) * seconds * 1.5))
        await submit.round(clients, seconds, lambda i, n, it=iter(bodies): next(it, None), {})
        if nonlocal_batch[0]:
            # Enough bodies for the whole round at the batch path's own rate (the last
            # round's, else a guess above the goal): sized from `submitEvent`'s rate, the
            # pool ran dry after a few requests and the figure measured their latency.
            expected = batch.rates[-1] if batch.rates else 6000.0
            many = batches(max(8, int(expected * seconds * 1.5 / 100)))
            probe = many.pop()
            conn = Connection(url)
            _, raw = await conn.post(probe)
            conn.close()
            if b"submitEvents" in raw and b'"errors"' in raw and b"Cannot query" in raw:
                nonlocal_batch[0] = False
            else:
                await batch.round(4, seconds, lambda i, n, it=iter(many): next(it, None), {},
                                  per_request=100)  # fmt: skip
                expected = resubmit.rates[-1] if resubmit.rates else 6000.0
                mixed = batches(max(8, int(expected * seconds * 1.5 / 100)), resent=10)
                await resubmit.round(4, seconds, lambda i, n, it=iter(mixed): next(it, None),
                                     {}, per_request=100)  # fmt: skip

    def figure(values: list[float]) -> dict[str, float]:
        med, low, high = median_range(values)
        return {"median": med, "min": low, "max": high}

    actions = figure(stateward.rates)
    bare_rate = figure(baseline.rates)
    out: dict[str, Any] = {
        "actions_per_s": actions["median"],
        "server_ms_per_action": median_range(stateward.cpu_ms)[0],
        "loop_ms_per_action": median_range(stateward.loop_ms)[0],
        "loop_busy": median_range(stateward.loop_busy)[0],
        "p50_ms": percentile(stateward.latencies, 0.50),
        "p99_ms": percentile(stateward.latencies, 0.99),
        "bare_per_s": bare_rate["median"],
        "bare_server_ms": median_range(baseline.cpu_ms)[0],
        "ratio_vs_bare": actions["median"] / bare_rate["median"],
        "submit_per_s": median_range(submit.rates)[0],
        "submit_server_ms": median_range(submit.cpu_ms)[0],
        "submit_p99_ms": percentile(submit.latencies, 0.99),
        "batch_submit_per_s": median_range(batch.rates)[0] if batch.rates else None,
        "batch_server_ms_per_event": median_range(batch.cpu_ms)[0] if batch.cpu_ms else None,
        "batch_loop_ms_per_event": median_range(batch.loop_ms)[0] if batch.loop_ms else None,
        "batch_loop_busy": median_range(batch.loop_busy)[0] if batch.loop_busy else None,
        "batch_resubmit_per_s": median_range(resubmit.rates)[0] if resubmit.rates else None,
        "batch_resubmit_server_ms_per_event": (
            median_range(resubmit.cpu_ms)[0] if resubmit.cpu_ms else None
        ),
        "ranges": {
            "actions_per_s": actions,
            "server_ms_per_action": figure(stateward.cpu_ms),
            "bare_per_s": bare_rate,
            "bare_server_ms": figure(baseline.cpu_ms),
            "submit_per_s": figure(submit.rates),
            "submit_server_ms": figure(submit.cpu_ms),
            **({"batch_submit_per_s": figure(batch.rates)} if batch.rates else {}),
            **({"batch_resubmit_per_s": figure(resubmit.rates)} if resubmit.rates else {}),
        },
    }
    return out


# -- delivery ----------------------------------------------------------------------------


class _LeanSocket(asyncio.Protocol):
    """One websocket client at a few µs of CPU per frame (the `websockets` library cost
    ≈ 25 µs, i.e. ≈ 25 ms for one event to 1,000 sockets read in this one process, which
    the p99 then measured): the HTTP upgrade, masked frames out, unmasked text frames in,
    pings answered. Receipt times are taken once per read from the socket."""

    def __init__(self, subs: Subscribers) -> None:
        self.subs = subs
        self.transport: Any = None
        self.buffer = b""
        self.upgraded = asyncio.get_running_loop().create_future()
        self.acked = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def send_text(self, text: str, opcode: int = 0x1) -> None:
        data = text.encode()
        mask = os.urandom(4)
        size = len(data)
        if size < 126:
            head = bytes((0x80 | opcode, 0x80 | size))
        else:
            head = bytes((0x80 | opcode, 0x80 | 126)) + size.to_bytes(2, "big")
        key = int.from_bytes((mask * (size // 4 + 1))[:size], "big")
        masked = (int.from_bytes(data, "big") ^ key).to_bytes(size, "big") if size else b""
        self.transport.write(head + mask + masked)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buffer = self.buffer + data
        if not self.upgraded.done():
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self.buffer = buffer
                return
            if not buffer.startswith(b"HTTP/1.1 101"):
                self.upgraded.set_exception(RuntimeError(buffer[:200].decode(errors="replace")))
                return
            self.upgraded.set_result(None)
            buffer = buffer[end + 4 :]
        at = 0
        while len(buffer) - at >= 2:
            opcode, size = buffer[at] & 0x0F, buffer[at + 1] & 0x7F
            head = 2
            if size == 126:
                if len(buffer) - at < 4:
                    break
                size, head = int.from_bytes(buffer[at + 2 : at + 4], "big"), 4
            elif size == 127:
                if len(buffer) - at < 10:
                    break
                size, head = int.from_bytes(buffer[at + 2 : at + 10], "big"), 10
            if len(buffer) - at < head + size:
                break
            payload = buffer[at + head : at + head + size]
            at += head + size
            if opcode == 0x1:
                self.subs.frame(payload, now, self)
            elif opcode == 0x9:  # ping -> pong
                self.send_text(payload.decode("latin-1"), 0xA)
        self.buffer = buffer[at:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.upgraded.done():
            self.upgraded.set_exception(ConnectionError("closed during the upgrade"))


class Subscribers:
    """`count` websocket clients; `arrived[id]` lists the receipt times of frame `id`."""

    MARKER = b'"instanceId":"'

    def __init__(self) -> None:
        self.arrived: dict[str, list[float]] = {}
        self.sockets: list[_LeanSocket] = []
        self.received = 0

    def frame(self, payload: bytes, now: float, sock: _LeanSocket) -> None:
        at = payload.find(self.MARKER)
        if at < 0:
            if b"connection_ack" in payload and not sock.acked.done():
                sock.acked.set_result(None)
            return
        at += len(self.MARKER)
        key = payload[at : payload.index(b'"', at)].decode()
        self.arrived.setdefault(key, []).append(now)
        self.received += 1

    async def connect(self, ws_url: str, count: int, token: str | None) -> None:
        parsed = urlsplit(ws_url)
        loop = asyncio.get_running_loop()

        async def one() -> None:
            _, sock = await loop.create_connection(
                lambda: _LeanSocket(self), parsed.hostname, parsed.port
            )
            key = base64.b64encode(os.urandom(16)).decode()
            sock.transport.write(
                f"GET {parsed.path or '/'} HTTP/1.1\r\nHost: {parsed.netloc}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n".encode()
            )
            await asyncio.wait_for(sock.upgraded, 60)
            if token is not None:
                init = {"authorization": f"Bearer {token}"}
                sock.send_text(json.dumps({"type": "connection_init", "payload": init}))
                await asyncio.wait_for(sock.acked, 60)
                sock.send_text(json.dumps({"id": "1", "type": "subscribe",
                                           "payload": {"query": SUBSCRIBE}}))  # fmt: skip
            self.sockets.append(sock)

        for start in range(0, count, 50):  # small batches (listen backlog)
            await asyncio.gather(*(one() for _ in range(min(50, count - start))))

    async def wait_for(self, total: int, timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while self.received < total and time.perf_counter() < deadline:
            await asyncio.sleep(0.005)

    async def close(self) -> None:
        for sock in self.sockets:
            if not sock.transport.is_closing():
                sock.send_text("\x03\xe8", 0x8)  # close 1000
                sock.transport.close()
        await asyncio.sleep(0.2)


async def _drive(send: Any, keys: list[str], rate: float | None) -> dict[str, float]:
    """Send one event per key, at `rate` per second (None: BURST at a time, flat out)."""
    sent: dict[str, float] = {}
    if rate is None:
        gate = asyncio.Semaphore(BURST)

        async def one(key: str) -> None:
            async with gate:
                sent[key] = time.perf_counter()
                await send(key)

        await asyncio.gather(*(one(k) for k in keys))
        return sent
    began = time.perf_counter()
    for n, key in enumerate(keys):
        delay = began + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        sent[key] = time.perf_counter()
        await send(key)
    return sent


def _latencies(subs: Subscribers, sent: dict[str, float]) -> list[float]:
    return [t - sent[k] for k, times in subs.arrived.items() if k in sent for t in times]


def _spreads(subs: Subscribers, sent: dict[str, float]) -> list[float]:
    """Each delivery's delay after the event's first delivery: the fan-out's own part of
    the latency (the rest is the action's round trip to the commit and the bus)."""
    return [t - min(times) for k, times in subs.arrived.items() if k in sent for t in times]


async def bench_delivery(
    server: Proc, raw: Proc, token: str, sizes: list[int], offered: float, steady_s: float,
    burst: int,
) -> dict[str, Any]:  # fmt: skip
    """Steady offered load (p50/p99) and capacity vs a raw broadcast, per size."""
    url = server.url
    need = sum(int(offered / n * steady_s) + burst for n in sizes)
    instances = await prepare(url, token, need)
    # BURST keep-alive connections each, so a burst keeps BURST actions in flight (group commit
    # batches them) instead of one at a time: the capacity phase measures the fan-out,
    # not one action's round trip 40 times over.
    conns: asyncio.Queue[Connection] = asyncio.Queue()
    raw_conns: asyncio.Queue[Connection] = asyncio.Queue()
    for _ in range(BURST):
        conns.put_nowait(Connection(url, {"Authorization": f"Bearer {token}"}))
        raw_conns.put_nowait(Connection(raw.url))

    async def act(instance: str) -> None:
        conn = await conns.get()
        try:
            status, body = await conn.post(
                json.dumps({"query": ACT, "variables": {"i": instance}}).encode()
            )
        finally:
            conns.put_nowait(conn)
        if status != 200 or b'"errors"' in body:
            raise RuntimeError(body[:300])

    async def publish(key: str) -> None:
        frame = json.dumps({"id": "1", "type": "next", "payload": {"data": {"events": {
            "cursor": "c" * 16, "instanceId": key}}}}, separators=(",", ":"))  # fmt: skip
        conn = await raw_conns.get()
        try:
            await conn.post(frame.encode())
        finally:
            raw_conns.put_nowait(conn)

    out: dict[str, Any] = {}
    ws_url = "ws" + url[len("http") :]
    raw_ws = "ws" + raw.url[len("http") : -len("/publish")] + "/ws"
    for size in sizes:
        steady = [instances.pop() for _ in range(int(offered / size * steady_s))]
        bursting = [instances.pop() for _ in range(burst)]
        subs = Subscribers()
        await subs.connect(ws_url, size, token)
        await asyncio.sleep(0.5)  # every subscribe frame handled
        cpu = server.cpu()
        sent = await _drive(act, steady, offered / size)
        await subs.wait_for(size * len(steady), 60)
        lat = _latencies(subs, sent)
        out[f"delivery_p50_ms_{size}"] = percentile(lat, 0.5)
        out[f"delivery_p99_ms_{size}"] = percentile(lat, 0.99)
        out[f"delivery_spread_p99_ms_{size}"] = percentile(_spreads(subs, sent), 0.99)
        out[f"delivery_server_us_{size}"] = (server.cpu() - cpu) * 1e6 / max(1, subs.received)
        before, began, cpu = subs.received, time.perf_counter(), server.cpu()
        mine = time.process_time()
        await _drive(act, bursting, None)
        await subs.wait_for(before + size * burst, 120)
        out[f"deliveries_per_s_{size}"] = (subs.received - before) / (time.perf_counter() - began)
        out[f"capacity_server_us_{size}"] = (
            (server.cpu() - cpu) * 1e6 / max(1, subs.received - before)
        )
        out[f"capacity_client_us_{size}"] = (
            (time.process_time() - mine) * 1e6 / max(1, subs.received - before)
        )
        await subs.close()
        # the raw broadcast, same clients, same frames' shape
        rsubs = Subscribers()
        await rsubs.connect(raw_ws, size, None)
        await asyncio.sleep(0.3)
        keys = [f"r{n}-{uuid.uuid4().hex[:8]}" for n in range(len(steady))]
        sent = await _drive(publish, keys, offered / size)
        await rsubs.wait_for(size * len(keys), 60)
        out[f"raw_p99_ms_{size}"] = percentile(_latencies(rsubs, sent), 0.99)
        out[f"raw_spread_p99_ms_{size}"] = percentile(_spreads(rsubs, sent), 0.99)
        keys = [f"b{n}-{uuid.uuid4().hex[:8]}" for n in range(burst)]
        before, began, cpu = rsubs.received, time.perf_counter(), raw.cpu()
        mine = time.process_time()
        await _drive(publish, keys, None)
        await rsubs.wait_for(before + size * burst, 120)
        out[f"raw_deliveries_per_s_{size}"] = (rsubs.received - before) / (
            time.perf_counter() - began
        )
        out[f"raw_capacity_server_us_{size}"] = (
            (raw.cpu() - cpu) * 1e6 / max(1, rsubs.received - before)
        )
        out[f"raw_capacity_client_us_{size}"] = (
            (time.process_time() - mine) * 1e6 / max(1, rsubs.received - before)
        )
        await rsubs.close()
        out[f"delivery_ratio_vs_raw_{size}"] = (
            out[f"deliveries_per_s_{size}"] / out[f"raw_deliveries_per_s_{size}"]
        )
    for queue in (conns, raw_conns):
        while not queue.empty():
            queue.get_nowait().close()
    out["delivery_ratio_vs_raw"] = out[f"delivery_ratio_vs_raw_{sizes[0]}"]
    return out


# -- metrics overhead --------------------------------------------------------------------


def run_overhead(tmp: str, clients: int, seconds: float, rounds: int) -> dict[str, float]:
    """A plain and an observed server in alternating rounds: observed ÷ plain actions/s."""
    procs: list[Proc] = []
    try:
        sink = Proc([sys.executable, __file__, "--otlp-sink"], {}, tmp)
        procs.append(sink)
        targets = []
        observed = {"STATEWARD_METRICS": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url}
        for name, extra in (
            ("plain", {}),
            ("observed", observed),  # as deployed: the default sampler (1 request in 10)
            ("observed_all", {**observed, "STATEWARD_TRACE_SAMPLE_RATIO": "1"}),
        ):
            procs.append(start_stateward(tmp, name, extra))
            token = asyncio.run(login(procs[-1].url, Path(tmp) / f"{name}-operator.json"))
            targets.append((Target(procs[-1], procs[-1].url), token))

        async def measure() -> None:
            for target, token in targets:
                ids = await prepare(target.url, token, clients)
                bodies = [json.dumps({"query": ACT, "variables": {"i": i}}).encode() for i in ids]
                target.bodies = bodies  # type: ignore[attr-defined]
            for _ in range(rounds):
                for target, token in targets:
                    bodies = target.bodies  # type: ignore[attr-defined]
                    await target.round(clients, seconds, lambda i, n, b=bodies: b[i],
                                       {"Authorization": f"Bearer {token}"})  # fmt: skip

        asyncio.run(measure())
        rates = [median_range(target.rates)[0] for target, _ in targets]
        cpu_ms = [median_range(target.cpu_ms)[0] for target, _ in targets]
        return {
            "plain_actions_per_s": rates[0],
            "observed_actions_per_s": rates[1],
            "metrics_overhead": rates[1] / rates[0],
            # The steadier figure on a shared box: server CPU per action, plain ÷ observed.
            "plain_server_ms_per_action": cpu_ms[0],
            "observed_server_ms_per_action": cpu_ms[1],
            "metrics_overhead_cpu": cpu_ms[0] / cpu_ms[1],
            # Not the goal's figure: every request traced (STATEWARD_TRACE_SAMPLE_RATIO=1).
            "observed_all_actions_per_s": rates[2],
            "observed_all_server_ms_per_action": cpu_ms[2],
            "metrics_overhead_all": rates[2] / rates[0],
            "metrics_overhead_cpu_all": cpu_ms[0] / cpu_ms[2],
        }
    finally:
        for proc in procs:
            proc.stop()


# -- main --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run the measurements; print a table (and a JSON line with `--json`)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs (CI)")
    parser.add_argument("--json", action="store_true", help="print a JSON object last")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--subscribers", type=int, default=500)
    parser.add_argument("--offered", type=float, default=2000.0,
                        help="steady deliveries/s offered in the delivery test")  # fmt: skip
    parser.add_argument("--only", choices=["throughput", "delivery", "metrics_overhead"])
    parser.add_argument(
        "--server-env", action="append", default=[], metavar="NAME=VALUE",
        help="an environment variable of the stateward server (repeatable), e.g. "
        "STATEWARD_SERVER_CPUS=1 for the one-box setup; the baselines keep theirs",
    )  # fmt: skip
    parser.add_argument("--bare-server", metavar="DB_URL", help=argparse.SUPPRESS)
    parser.add_argument("--raw-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--otlp-sink", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare_server:
        bare_server(args.bare_server)
        return 0
    if args.raw_server:
        raw_server()
        return 0
    if args.otlp_sink:
        otlp_sink()
        return 0
    seconds = 2.0 if args.quick else 8.0
    rounds = 1 if args.quick else args.rounds
    sizes = [args.subscribers // 5, args.subscribers * 2 // 5] if args.quick else [
        args.subscribers, args.subscribers * 2]  # fmt: skip
    try:
        server_env = env_pairs(args.server_env)
    except ValueError as error:
        parser.error(f"--server-env: {error}")
    result: dict[str, Any] = {"load_average_before": load_average(), "server_env": server_env}
    counters = cpu_counters()
    with tempfile.TemporaryDirectory(prefix="stateward-bench-") as tmp:
        if args.only in (None, "throughput", "delivery"):
            server = start_stateward(tmp, "api", server_env)
            procs = [server]
            try:
                token = asyncio.run(login(server.url, Path(tmp) / "api-operator.json"))
                if args.only in (None, "throughput"):
                    bare_db = f"sqlite+aiosqlite:///{tmp}/bare.db"
                    bare = Proc([sys.executable, __file__, "--bare-server", bare_db], {}, tmp)
                    procs.append(bare)
                    result.update(asyncio.run(bench_throughput(
                        server, bare, token, Path(tmp) / "api-operator.json", args.clients,
                        seconds, rounds)))  # fmt: skip
                    bare.stop()
                if args.only in (None, "delivery"):
                    raw = Proc([sys.executable, __file__, "--raw-server"], {}, tmp)
                    procs.append(raw)
                    result.update(asyncio.run(bench_delivery(
                        server, raw, token, sizes, args.offered, 1.5 if args.quick else 6.0,
                        10 if args.quick else 40)))  # fmt: skip
                    if args.quick:  # the keys CI reads, from the smaller sizes
                        result["delivery_p99_ms_500"] = result[f"delivery_p99_ms_{sizes[0]}"]
                        result["delivery_p99_ms_1000"] = result[f"delivery_p99_ms_{sizes[1]}"]
            finally:
                for proc in procs:
                    proc.stop()
        if args.only == "metrics_overhead" or (args.only is None and not args.quick):
            result.update(run_overhead(tmp, args.clients, seconds, rounds))
    result["load_average_after"] = load_average()
    result["steal_share"] = steal_share(counters, cpu_counters())
    report(result, args.json)
    return 0


def report(result: dict[str, Any], as_json: bool) -> None:
    """A table of the figures; with `as_json` the JSON object of every figure last."""
    ranges = result.get("ranges", {})

    def rng(key: str) -> str:
        if key not in ranges:
            return ""
        return f" [{ranges[key]['min']:.4g}–{ranges[key]['max']:.4g}]"

    for key, value in result.items():
        if key == "ranges":
            continue
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)
        print(f"{key:32s} {shown}{rng(key)}")
    if as_json:

        def rounded(value: Any) -> Any:
            if isinstance(value, float):
                return round(value, 3)
            if isinstance(value, dict):
                return {k: rounded(v) for k, v in value.items()}
            return value

        print(json.dumps(rounded(result)))


if __name__ == "__main__":
    sys.exit(main())
