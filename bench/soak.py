"""Soak: N nodes on one PostgreSQL database and a Redis bus, mixed load, injected faults.

Starts its own `redis-server` on a free loopback port and creates a fresh PostgreSQL
database (dropped at the end), then N `stateward serve` nodes on them. Load, for
`--seconds`: counters incremented through every node (`performAction` with an
`idempotencyKey`, retried with the same key on any failure, against another node),
client-signed `submitEvent` increments (retried with the same envelope), SLA and timer
instances, public entry (anonymous `startPublic`, then the visitor's `advancePublic` steps
with its entry token and an `idempotencyKey`), and 36 resuming subscribers
(`events(after:)`, reconnecting to another node with the last cursor whenever their socket
ends). A stall watchdog: when a request has been in flight for more than 3 s while no
fault is running, it records the stall and, with `py-spy` on PATH, dumps every node's
threads (`stall-<n>-node<i>.txt` in `--keep-logs`) with the database's sessions. With
`--faults`, a cycle of faults repeats until the last fifth of the run:
`pg_terminate_backend` of every node connection, a node paused (SIGSTOP) for 10 s, Redis
killed and restarted, a node killed (`kill -9`) and restarted.

Invariants checked (exit 1 when one fails): every acknowledged increment stored exactly
once (acknowledged = stored, contiguous seqs, no duplicate), every SLA mark and timer once,
subscribers gap-free and duplicate-free after their resumes, every acknowledged visitor
step stored once, `stateward verify` clean, no `INTERNAL_ERROR`. Reported against the
goals: write p50/p99, the worst write on a healthy node while a peer is paused, node RSS
slope over the last third of the run, and the stalls seen with no fault running.
Usage: `python bench/soak.py --nodes 2 --seconds 150 [--faults] [--json]`; `--json`
prints one JSON object on the last line. Loopback only; every process it starts is
stopped before it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets
from sqlalchemy import text
from sqlalchemy.engine import make_url

from stateward.governance.envelope import build_envelope
from stateward.governance.keys import generate_keypair, read_key_file
from stateward.governance.verification import sign_envelope
from stateward.persistence import create_engine

LISTENING = re.compile(r"listening on (http://\S+/graphql)")
NS = "soak/load"
COUNTER = {
    "$version": "2.0", "$path": f"{NS}/counter", "initial": "open",
    "states": {"open": {"label": "Open"}, "done": {"label": "Done", "terminal": True}},
    "actions": {"bump": {"from": "open", "mutate": {"$increment": {"n": 1}}}},
}  # fmt: skip
SLA = {
    "$version": "2.0", "$path": f"{NS}/sla", "initial": "intake",
    "states": {"intake": {"label": "Intake"},
               "review": {"label": "Review", "assign": "ops", "sla_seconds": 3},
               "done": {"label": "Done", "terminal": True}},
    "actions": {"submit": {"from": "intake", "to": "review"},
                "close": {"from": "review", "to": "done"}},
}  # fmt: skip
TIMER = {
    "$version": "2.0", "$path": f"{NS}/timer", "initial": "waiting",
    "states": {"waiting": {"label": "Waiting"}, "expired": {"label": "Expired", "terminal": True}},
    "actions": {"arm": {"from": "waiting", "schedule": [{"action": "expire", "after": 2}]},
                "expire": {"from": "waiting", "to": "expired"}},
}  # fmt: skip
PUBLIC = {
    "$version": "2.0", "$path": f"{NS}/intake", "initial": "form",
    "states": {
        "form": {"label": "Your request", "audience": "public",
                 "form": {"fields": {"name": {"type": "string", "required": True}}}},
        "details": {"label": "Details", "audience": "public"},
        "done": {"label": "Sent", "terminal": True},
    },
    "actions": {
        "send": {"role": "*", "from": "form", "to": "details",
                 "mutate": {"$set": {"name": "input.fields.name"}}},
        "add": {"role": "*", "from": "details", "mutate": {"$increment": {"steps": 1}}},
        "finish": {"role": "*", "from": "details", "to": "done"},
    },
}  # fmt: skip
START_PUBLIC = """mutation($w:String!,$d:JSON){startPublic(workflow:$w,data:$d){token
  view{state{key}}}}"""
ADVANCE_PUBLIC = """mutation($t:String!,$a:String!,$i:JSON,$k:String){advancePublic(token:$t,
  action:$a,input:$i,idempotencyKey:$k){state{key} status}}"""
BUMP = """mutation($i:ID!,$k:String){performAction(instance:$i,action:"bump",
  idempotencyKey:$k){duplicate event{seq}}}"""
SUBMIT = """mutation($e:JSON!,$s:String!,$g:String!){submitEvent(event:$e,signature:$s,signer:$g)
  {duplicate event{seq}}}"""
SUBSCRIBE = (
    'subscription($a:String){events(filter:{namespace:"' + NS + '"},after:$a)'
    "{cursor process seq hash}}"
)


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Redis:
    """Our own redis-server (no persistence) on a free loopback port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port)):
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


class Node:
    """One `stateward serve` process; restartable (a new port each time)."""

    def __init__(self, index: int, env: dict[str, str], cwd: str, log: Path) -> None:
        self.index = index
        self.env = env
        self.cwd = cwd
        self.log = log
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None
        self.paused = False
        self.down = False
        self.lines: list[str] = []

    def start(self) -> None:
        self.url = ""
        ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "stateward.cli", "serve", "--port", "0"],
            cwd=self.cwd, env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        proc = self.proc

        def read() -> None:
            assert proc.stdout is not None
            with self.log.open("a") as out:
                for line in proc.stdout:
                    out.write(line)
                    self.lines.append(line.rstrip())
                    found = LISTENING.search(line)
                    if found and not ready.is_set():
                        self.url = found.group(1)
                        ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(90) or not self.url:
            raise RuntimeError(f"node {self.index} did not start: {self.lines[-20:]}")
        self.down = False

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, grace: float = 15.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def rss_mb(self) -> float:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0


@dataclass
class Stats:
    """Everything the load recorded."""

    acked: Counter[str] = field(default_factory=Counter)
    unknown: Counter[str] = field(default_factory=Counter)
    writes: list[tuple[float, float, int]] = field(default_factory=list)  # (start, s, node)
    codes: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    resumes: int = 0
    sla: list[str] = field(default_factory=list)
    timers: list[str] = field(default_factory=list)
    pauses: list[tuple[float, float, int]] = field(default_factory=list)  # (from, to, node)
    faults: Counter[str] = field(default_factory=Counter)
    rss: dict[int, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    deliveries: int = 0
    visitors: int = 0
    visitor_steps: int = 0
    visitor_unknown: int = 0
    #: Requests in flight: id -> (started, node index).
    inflight: dict[int, tuple[float, int]] = field(default_factory=dict)
    stalls: list[dict[str, Any]] = field(default_factory=list)
    fault_running: bool = False


class Soak:
    """The run: processes, clients, faults, invariants."""

    def __init__(self, args: argparse.Namespace, tmp: str) -> None:
        self.args = args
        self.tmp = tmp
        self.stats = Stats()
        self.rng = random.Random(args.seed)
        self.redis = Redis()
        admin = make_url(args.pg).set(drivername="postgresql+asyncpg")
        self.db_name = f"sw_soak_{uuid.uuid4().hex[:10]}"
        self.admin_url = admin.set(database="postgres").render_as_string(hide_password=False)
        self.db_url = admin.set(database=self.db_name).render_as_string(hide_password=False)
        self.nodes: list[Node] = []
        self.token = ""
        self.stop = asyncio.Event()
        self.started = 0.0

    # -- setup and teardown ------------------------------------------------------------

    async def _admin(self, sql: str) -> None:
        engine = create_engine(self.admin_url, isolation_level="AUTOCOMMIT", pool_size=1)
        try:
            async with engine.connect() as conn:
                await conn.execute(text(sql))
        finally:
            await engine.dispose()

    async def setup(self) -> None:
        await self._admin(f'CREATE DATABASE "{self.db_name}"')
        self.redis.start()
        channel = f"soak-{uuid.uuid4().hex[:8]}"
        for i in range(self.args.nodes):
            env = {
                "STATEWARD_DATABASE_URL": self.db_url,
                "STATEWARD_BUS_URL": self.redis.url,
                "STATEWARD_BUS_CHANNEL": channel,
                "STATEWARD_NODE_KEY_FILE": f"{self.tmp}/node{i}.json",
                "STATEWARD_OPERATOR_KEY_FILE": f"{self.tmp}/operator.json",
                "STATEWARD_SCAN_INTERVAL": "0.5",
            }
            node = Node(i, env, self.tmp, Path(self.tmp) / f"node{i}.log")
            node.start()  # one after the other: the first makes the genesis
            self.nodes.append(node)
        self.operator = read_key_file(Path(self.tmp) / "operator.json")
        self.token = await self._login(self.nodes[0].url)
        self.client_key = generate_keypair()
        async with httpx.AsyncClient(timeout=30, headers=self._auth) as http:
            for definition in (COUNTER, SLA, TIMER, PUBLIC):
                await self._ok(http, self.nodes[0].url,
                               "mutation($d:JSON!){addWorkflow(definition:$d){path}}",
                               {"d": definition})  # fmt: skip
            self.net = (await self._ok(http, self.nodes[0].url, "{net}", {}))["net"]
            grant = ('mutation($n:String!,$a:String!){grantRole(namespace:$n,actor:$a,'
                     'roles:["writer"]){namespace}}')  # fmt: skip
            # Client-signed writers must be able to read what they write (tenant isolation).
            v = {"n": NS, "a": self.client_key.public}
            await self._ok(http, self.nodes[0].url, grant, v)
            start = "mutation($w:String!){startInstance(workflow:$w){instanceId}}"
            self.counters = [
                (await self._ok(http, self.nodes[0].url, start, {"w": COUNTER["$path"]}))[
                    "startInstance"]["instanceId"]
                for _ in range(self.args.instances)
            ]  # fmt: skip

    async def teardown(self) -> None:
        for node in self.nodes:
            node.stop()
        self.redis.kill()
        with contextlib.suppress(Exception):
            await self._admin(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{self.db_name}' AND pid <> pg_backend_pid()"
            )
            await self._admin(f'DROP DATABASE IF EXISTS "{self.db_name}"')

    @property
    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def _ok(self, http: httpx.AsyncClient, url: str, query: str, v: dict[str, Any]) -> Any:
        body = (await http.post(url, json={"query": query, "variables": v})).json()
        if body.get("errors"):
            raise RuntimeError(json.dumps(body["errors"])[:500])
        return body["data"]

    async def _login(self, url: str) -> str:
        async with httpx.AsyncClient(timeout=30) as http:
            q = "mutation($k:String!){authChallenge(publicKey:$k){challenge}}"
            c = (await self._ok(http, url, q, {"k": self.operator.public}))["authChallenge"]
            q = ("mutation($k:String!,$c:String!,$s:String!){authLogin(publicKey:$k,"
                 "challenge:$c,signature:$s){token}}")  # fmt: skip
            sig = self.operator.sign(c["challenge"].encode())
            v = {"k": self.operator.public, "c": c["challenge"], "s": sig}
            return str((await self._ok(http, url, q, v))["authLogin"]["token"])

    def live(self) -> list[Node]:
        return [n for n in self.nodes if not n.down and not n.paused and n.url]

    # -- load ----------------------------------------------------------------------------

    async def _write(self, http: httpx.AsyncClient, prefer: int, query: str,
                     variables: dict[str, Any], what: str) -> bool:  # fmt: skip
        """POST until acknowledged (any node; the same key/envelope every time)."""
        deadline = time.monotonic() + 90
        attempt = 0
        while time.monotonic() < deadline and not (self.stop.is_set() and attempt > 20):
            nodes = self.live() or self.nodes
            node = nodes[(prefer + attempt) % len(nodes)]
            attempt += 1
            began = time.monotonic()
            ticket = id(variables) ^ attempt
            self.stats.inflight[ticket] = (began, node.index)
            try:
                response = await http.post(node.url, json={"query": query, "variables": variables})
                body = response.json()
            except (httpx.HTTPError, ValueError):
                self.stats.retries += 1
                await asyncio.sleep(0.2)
                continue
            finally:
                self.stats.inflight.pop(ticket, None)
            errors = body.get("errors") or []
            for error in errors:
                self.stats.codes[str((error.get("extensions") or {}).get("code"))] += 1
            if not errors:
                self.stats.writes.append((began, time.monotonic() - began, node.index))
                return True
            self.stats.retries += 1
            await asyncio.sleep(0.1)
        return False

    async def counter_writer(self, index: int) -> None:
        async with httpx.AsyncClient(timeout=30, headers=self._auth) as http:
            while not self.stop.is_set():
                pid = self.rng.choice(self.counters)
                v = {"i": pid, "k": uuid.uuid4().hex}
                if await self._write(http, index, BUMP, v, "bump"):
                    self.stats.acked[pid] += 1
                else:
                    self.stats.unknown[pid] += 1

    async def client_writer(self, index: int) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            while not self.stop.is_set():
                pid = self.rng.choice(self.counters)
                envelope = build_envelope(
                    self.net, pid, "bump", COUNTER["$path"], {}, self.client_key.public, _now()
                )
                signed = sign_envelope(envelope, self.client_key)
                v = {"e": envelope.to_json(), "s": signed.signature, "g": signed.signer}
                if await self._write(http, index, SUBMIT, v, "submit"):
                    self.stats.acked[pid] += 1
                else:
                    self.stats.unknown[pid] += 1

    async def kernel_load(self) -> None:
        """An SLA instance and a timer instance started about every second."""
        start = (
            "mutation($w:String!,$k:String){startInstance(workflow:$w,idempotencyKey:$k)"
            "{instanceId}}"
        )
        act = ('mutation($i:ID!,$a:String!,$k:String){performAction(instance:$i,action:$a,'
               "idempotencyKey:$k){duplicate}}")  # fmt: skip
        async with httpx.AsyncClient(timeout=30, headers=self._auth) as http:
            n = 0
            while not self.stop.is_set():
                for workflow, action, bucket in ((SLA, "submit", self.stats.sla),
                                                 (TIMER, "arm", self.stats.timers)):  # fmt: skip
                    key = uuid.uuid4().hex
                    pid = ""
                    for _ in range(30):
                        node = (self.live() or self.nodes)[n % len(self.nodes)]
                        n += 1
                        with contextlib.suppress(Exception):
                            data = await self._ok(http, node.url, start,
                                                  {"w": workflow["$path"], "k": key})  # fmt: skip
                            pid = data["startInstance"]["instanceId"]
                            break
                        await asyncio.sleep(0.2)
                    v = {"i": pid, "a": action, "k": key + "a"}
                    if pid and await self._write(http, n, act, v, action):
                        bucket.append(pid)
                await asyncio.sleep(1.0)

    async def visitor(self, index: int) -> None:
        """Anonymous public entry: `startPublic`, then the visitor's steps with its token
        (each with an `idempotencyKey`, retried with the same key on any failure)."""
        async with httpx.AsyncClient(timeout=30) as http:
            n = index
            while not self.stop.is_set():
                n += 1
                token = ""
                for _ in range(30):
                    node = (self.live() or self.nodes)[n % len(self.nodes)]
                    n += 1
                    with contextlib.suppress(Exception):
                        data = await self._ok(http, node.url, START_PUBLIC,
                                              {"w": PUBLIC["$path"], "d": {}})  # fmt: skip
                        token = data["startPublic"]["token"]
                        break
                    await asyncio.sleep(0.2)
                if not token:
                    continue
                self.stats.visitors += 1
                steps = [("send", {"fields": {"name": f"visitor {n}"}})]
                steps += [("add", {})] * self.rng.randint(1, 3) + [("finish", {})]
                for action, input in steps:
                    v = {"t": token, "a": action, "i": input, "k": uuid.uuid4().hex}
                    if await self._write(http, n, ADVANCE_PUBLIC, v, action):
                        self.stats.visitor_steps += 1
                    else:
                        self.stats.visitor_unknown += 1
                        break
                await asyncio.sleep(0.3)

    async def watchdog(self) -> None:
        """Catch the unexplained stall: a request in flight > 3 s with no fault running."""
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        spy = spy if Path(spy).exists() else ""
        last = 0.0
        while not self.stop.is_set():
            await asyncio.sleep(0.5)
            now = time.monotonic()
            if self.stats.fault_running or now - last < 20:
                continue
            slow = [(now - t, i) for t, i in list(self.stats.inflight.values()) if now - t > 3]
            if not slow:
                continue
            last = now
            stall: dict[str, Any] = {
                "at_s": round(now - self.started, 1),
                "utc": _now().isoformat(timespec="seconds"),  # to match the server's log
                "waiting_s": round(max(w for w, _ in slow), 1),
                "requests": len(slow),
                "nodes": sorted({i for _, i in slow}),
                "load": os.getloadavg()[0],
            }
            self.stats.stalls.append(stall)
            n = len(self.stats.stalls)
            out = Path(self.args.keep_logs or self.tmp)
            out.mkdir(parents=True, exist_ok=True)
            if spy:
                for node in self.nodes:
                    if node.proc is not None and not node.down:
                        dump = await asyncio.to_thread(
                            subprocess.run, [spy, "dump", "--pid", str(node.pid)],
                            capture_output=True, text=True, timeout=30,
                        )  # fmt: skip
                        (out / f"stall-{n}-node{node.index}.txt").write_text(
                            dump.stdout + dump.stderr
                        )
            with contextlib.suppress(Exception):
                engine = create_engine(self.db_url, pool_size=1)
                try:
                    async with engine.connect() as conn:
                        rows = (await conn.execute(text(
                            "SELECT pid, state, wait_event_type, wait_event, "
                            "now() - xact_start AS xact, left(query, 200) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                            "ORDER BY xact_start NULLS LAST"))).all()  # fmt: skip
                finally:
                    await engine.dispose()
                (out / f"stall-{n}-db.txt").write_text("\n".join(map(str, rows)))
            stall["dumps"] = str(out)

    async def subscriber(self, index: int, seen: list[int]) -> None:
        """Resume from the last cursor on another node whenever the socket ends."""
        first = True
        while not self.stop.is_set():
            nodes = self.live() or self.nodes
            node = nodes[(index + self.stats.resumes) % len(nodes)]
            after = str(seen[-1]) if seen else None
            if not first:
                self.stats.resumes += 1
            first = False
            try:
                ws_url = "ws" + node.url[len("http") :]
                async with websockets.connect(
                    ws_url, subprotocols=[websockets.Subprotocol("graphql-transport-ws")],
                    max_queue=None, open_timeout=10,
                ) as ws:  # fmt: skip
                    auth = {"authorization": f"Bearer {self.token}"}
                    await ws.send(json.dumps({"type": "connection_init", "payload": auth}))
                    await asyncio.wait_for(ws.recv(), 10)
                    sub = {"query": SUBSCRIBE, "variables": {"a": after}}
                    await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": sub}))
                    while not self.stop.is_set():
                        try:
                            raw = await asyncio.wait_for(ws.recv(), 1.0)
                        except TimeoutError:
                            if node.down:
                                break
                            continue
                        message = json.loads(raw)
                        if message["type"] == "next":
                            payload = message["payload"]
                            if payload.get("errors"):
                                for e in payload["errors"]:
                                    self.stats.codes[
                                        str((e.get("extensions") or {}).get("code"))
                                    ] += 1
                                break
                            seen.append(int(payload["data"]["events"]["cursor"]))
                            self.stats.deliveries += 1
                        elif message["type"] in ("error", "complete"):
                            break
                        elif message["type"] == "ping":
                            await ws.send(json.dumps({"type": "pong"}))
            except (OSError, websockets.WebSocketException, TimeoutError, ValueError):
                pass
            await asyncio.sleep(0.2)

    async def sample_rss(self) -> None:
        while not self.stop.is_set():
            t = time.monotonic() - self.started
            for node in self.nodes:
                if not node.down:
                    self.stats.rss[node.index].append((t, node.rss_mb()))
            await asyncio.sleep(2.0)

    # -- faults --------------------------------------------------------------------------

    async def faults(self) -> None:
        """Repeat the fault cycle until the last fifth of the run (node 0 is never hit)."""
        victim = self.nodes[-1] if len(self.nodes) > 1 else None
        end = self.started + self.args.seconds * 0.8
        await asyncio.sleep(min(10.0, self.args.seconds * 0.08))
        steps = ["terminate", "pause", "redis", "kill9"]
        i = 0
        while time.monotonic() < end - 12 and not self.stop.is_set():
            step = steps[i % len(steps)]
            i += 1
            self.stats.fault_running = True
            if step == "terminate":
                await self._admin(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    f"WHERE datname = '{self.db_name}' AND pid <> pg_backend_pid()"
                )
            elif step == "pause" and victim is not None:
                began = time.monotonic()
                victim.signal(signal.SIGSTOP)
                victim.paused = True
                await asyncio.sleep(10.0)
                victim.signal(signal.SIGCONT)
                victim.paused = False
                self.stats.pauses.append((began, time.monotonic(), victim.index))
            elif step == "redis":
                self.redis.kill()
                await asyncio.sleep(2.0)
                self.redis.start()
            elif step == "kill9" and victim is not None:
                victim.down = True
                victim.signal(signal.SIGKILL)
                assert victim.proc is not None
                victim.proc.wait(10)
                await asyncio.sleep(1.0)
                await asyncio.to_thread(victim.start)
            self.stats.faults[step] += 1
            await asyncio.sleep(5.0)  # the fault's aftermath (reconnects, resumes, restarts)
            self.stats.fault_running = False
            await asyncio.sleep(max(5.0, min(20.0, self.args.seconds / 12)))

    # -- the run -------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        await self.setup()
        self.started = time.monotonic()
        seen: list[list[int]] = [[] for _ in range(self.args.subscribers)]
        tasks = [asyncio.create_task(self.subscriber(i, seen[i]))
                 for i in range(self.args.subscribers)]  # fmt: skip
        await asyncio.sleep(1.0)
        tasks += [asyncio.create_task(self.counter_writer(i)) for i in range(self.args.writers)]
        tasks += [asyncio.create_task(self.client_writer(i)) for i in range(2)]
        tasks += [asyncio.create_task(self.kernel_load()), asyncio.create_task(self.sample_rss())]
        tasks += [asyncio.create_task(self.visitor(i)) for i in range(self.args.visitors)]
        tasks += [asyncio.create_task(self.watchdog())]
        fault_task = asyncio.create_task(self.faults()) if self.args.faults else None
        await asyncio.sleep(self.args.seconds)
        self.stop.set()
        if fault_task is not None:
            await fault_task
        for node in self.nodes:  # nothing stays paused or down
            node.signal(signal.SIGCONT)
            node.paused = False
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(6.0)  # the last SLA deadlines (3 s) and timers (2 s) come due
        return await self.check(seen)

    async def check(self, seen: list[list[int]]) -> dict[str, Any]:
        engine = create_engine(self.db_url, pool_size=2)
        problems: list[str] = []
        try:
            async with engine.connect() as conn:
                rows = (await conn.execute(text(
                    "SELECT p.id, (d.data->>'n')::int, p.seq, count(e.id), max(e.seq), "
                    "count(DISTINCT e.seq), count(e.id) FILTER (WHERE e.action = 'bump') "
                    "FROM processes p JOIN process_data d ON d.process_id = p.id "
                    "JOIN events e ON e.process_id = p.id "
                    "GROUP BY p.id, d.data, p.seq"))).all()  # fmt: skip
                for pid, n, seq, count, top, distinct, bumps in rows:
                    if not (count == top == distinct == seq):
                        problems.append(f"{pid}: seqs not contiguous ({count}/{top}/{seq})")
                    if pid in self.stats.acked or pid in self.stats.unknown:
                        acked, unknown = self.stats.acked[pid], self.stats.unknown[pid]
                        if not (acked <= bumps <= acked + unknown) or (n or 0) != bumps:
                            problems.append(f"{pid}: acked {acked} (+{unknown} unknown), "
                                            f"stored {bumps}, n={n}")  # fmt: skip
                marks = Counter(
                    (pid, kind)
                    for pid, kind in (await conn.execute(text(
                        "SELECT process_id, input->>'kind' FROM events WHERE action = '$sla'"
                    ))).all()
                )  # fmt: skip
                for pid in self.stats.sla:
                    for kind in ("warning", "breach"):
                        if marks[(pid, kind)] != 1:
                            problems.append(f"{pid}: SLA {kind} fired {marks[(pid, kind)]}x")
                fired = Counter(pid for (pid,) in (await conn.execute(text(
                    "SELECT process_id FROM events WHERE action = '$timer'"))).all())  # fmt: skip
                for pid in self.stats.timers:
                    if fired[pid] != 1:
                        problems.append(f"{pid}: timer fired {fired[pid]}x")
                stored = (await conn.execute(text(
                    "SELECT count(*) FROM events e JOIN processes p ON p.id = e.process_id "
                    "WHERE p.workflow = :w AND e.action IN ('send', 'add', 'finish')"),
                    {"w": PUBLIC["$path"]})).scalar_one()  # fmt: skip
                acked, unknown = self.stats.visitor_steps, self.stats.visitor_unknown
                if not acked <= stored <= acked + unknown:
                    problems.append(f"visitor steps: acked {acked} (+{unknown}), stored {stored}")
                ids = text("SELECT id FROM outbox WHERE namespace = :n ORDER BY id")
                outbox = [i for (i,) in (await conn.execute(ids, {"n": NS})).all()]
        finally:
            await engine.dispose()
        gaps = 0
        for cursors in seen:
            if not cursors:
                continue
            expected = [i for i in outbox if cursors[0] <= i <= cursors[-1]]
            if cursors != expected:
                gaps += 1
                problems.append(f"subscriber saw {len(cursors)} of {len(expected)} in order")
        verify = subprocess.run(
            [sys.executable, "-m", "stateward.cli", "verify", "--db", self.db_url],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if verify.returncode != 0:
            problems.append("verify: " + (verify.stdout + verify.stderr)[-500:])
        internal = self.stats.codes.get("INTERNAL_ERROR", 0)
        if internal:
            problems.append(f"{internal} INTERNAL_ERROR")
        if problems:
            self.print_unexpected_errors()
        return self.report(problems, gaps, verify.stderr.strip().splitlines()[-1:])

    def print_unexpected_errors(self, limit: int = 80) -> None:
        """The nodes' last logged errors with their tracebacks, to stderr: what an
        `INTERNAL_ERROR` was is then in CI's output, not only in the kept logs."""
        levels = ("DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL ")
        for node in self.nodes:
            lines = node.lines
            starts = [n for n, line in enumerate(lines) if line.startswith("ERROR ")]
            print(f"--- node{node.index}: {len(starts)} ERROR line(s); the last three:",
                  file=sys.stderr)  # fmt: skip
            shown: list[str] = []
            for n in starts[-3:]:
                shown.append(lines[n])
                for line in lines[n + 1 : n + 200]:
                    if line.startswith(levels):
                        break
                    shown.append(line)
            for line in shown[-limit:]:
                print(f"    {line}", file=sys.stderr)

    def report(self, problems: list[str], gaps: int, verified: list[str]) -> dict[str, Any]:
        lat = sorted(s for _, s, _ in self.stats.writes)

        def pct(q: float) -> float:
            return round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 1) if lat else 0.0

        paused_worst = 0.0
        for began, ended, victim in self.stats.pauses:
            during = [s for t, s, n in self.stats.writes if n != victim and began <= t <= ended]
            paused_worst = max([paused_worst, *during])
        slope = 0.0
        healthy = self.stats.rss.get(0, [])
        third = [p for p in healthy if p[0] >= self.args.seconds * 2 / 3]
        if len(third) >= 3:
            mx = sum(x for x, _ in third) / len(third)
            my = sum(y for _, y in third) / len(third)
            sxx = sum((x - mx) ** 2 for x, _ in third)
            slope = sum((x - mx) * (y - my) for x, y in third) / sxx * 60 if sxx else 0.0
        fallbacks = sum(
            1 for node in self.nodes for line in node.lines if "group commit failed" in line
        )
        transient = sum(
            1 for node in self.nodes for line in node.lines if "transient database fault" in line
        )
        return {
            "nodes": self.args.nodes,
            "seconds": self.args.seconds,
            "faults": dict(self.stats.faults),
            "acknowledged_writes": sum(self.stats.acked.values()),
            "unknown_writes": sum(self.stats.unknown.values()),
            "client_retries": self.stats.retries,
            "error_codes": dict(self.stats.codes),
            "internal_errors": self.stats.codes.get("INTERNAL_ERROR", 0),
            "write_p50_ms": pct(0.50),
            "write_p99_ms": pct(0.99),
            "write_max_ms": pct(1.0),
            "healthy_worst_write_while_peer_paused_ms": round(paused_worst * 1000, 1),
            "sla_instances": len(self.stats.sla),
            "timer_instances": len(self.stats.timers),
            "visitors": self.stats.visitors,
            "visitor_steps": self.stats.visitor_steps,
            "stalls_without_fault": self.stats.stalls,
            "subscribers": self.args.subscribers,
            "deliveries": self.stats.deliveries,
            "resumes": self.stats.resumes,
            "subscribers_with_gaps": gaps,
            "group_commit_fallbacks": fallbacks,
            "server_transient_retries": transient,
            "rss_node0_last_mb": round(healthy[-1][1], 1) if healthy else 0.0,
            "rss_slope_last_third_mb_per_min": round(slope, 2),
            "verify": verified[0] if verified else "",
            "problems": problems[:20],
            "ok": not problems,
        }


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--faults", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="--seconds 40")
    parser.add_argument("--writers", type=int, default=6, help="performAction workers")
    parser.add_argument("--subscribers", type=int, default=36)
    parser.add_argument("--visitors", type=int, default=2, help="public entry workers")
    parser.add_argument("--instances", type=int, default=6, help="counter instances")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--keep-logs", default="", help="copy the node logs into this folder")
    parser.add_argument(
        "--pg",
        default=os.environ.get("STATEWARD_TEST_POSTGRES_URL",
                               "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"),
        help="PostgreSQL server URL (a fresh database is created on it and dropped)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds = 40.0
    with tempfile.TemporaryDirectory(prefix="stateward-soak-") as tmp:
        soak = Soak(args, tmp)

        async def go() -> dict[str, Any]:
            try:
                return await soak.run()
            finally:
                await soak.teardown()

        result = asyncio.run(go())
        if args.keep_logs:
            Path(args.keep_logs).mkdir(parents=True, exist_ok=True)
            for log in Path(tmp).glob("node*.log"):
                (Path(args.keep_logs) / log.name).write_text(log.read_text())
    for key, value in result.items():
        print(f"{key:44} {value}")
    if args.json:
        print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
