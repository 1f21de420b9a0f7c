"""Shared bench plumbing: server processes, their CPU, a lean HTTP load generator.

- `Proc`: a subprocess that prints `listening on URL` when ready; `cpu()` reads its
  utime+stime (all threads) from /proc/PID/stat, so a bench reports server CPU per request
  (the steadiest figure on a shared machine) beside throughput.
- `start_stateward(folder, name, env)`: `stateward serve --port 0` on a fresh SQLite file.
- `hammer(...)`: `clients` raw asyncio HTTP/1.1 keep-alive connections POSTing for a
  while. It costs about 0.1 ms of CPU per request (httpx costs ~2 ms), so on a 2-core box
  the server, not the load generator, is what is measured.
- `login(url, key_file)`: a session token for a key (challenge signed with it).
- `median_range(values)`: (median, min, max).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

LISTENING = re.compile(r"listening on (http://\S+)")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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
        if not ready.wait(90) or not self.url:
            self.stop()
            raise RuntimeError("server did not start:\n" + "\n".join(self.lines[-30:]))

    def cpu(self) -> float:
        """CPU seconds (user + system, every thread) the process has used so far."""
        return cpu_seconds(self.proc.pid)

    def loop_cpu(self) -> float:
        """CPU seconds the process's main thread — a server's event loop — has used so
        far (/proc/PID/task/PID/stat): beside `cpu()`, how busy the one thread is that
        runs every request's Python."""
        return _ticks(f"{self.proc.pid}/task/{self.proc.pid}") / CLOCK_TICKS

    def stop(self) -> None:
        """SIGTERM, wait, kill when it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def process_stat(pid: int | str) -> tuple[str, list[str]]:
    """(command name, the fields after it) of /proc/PID/stat: `fields[11]` and `[12]` are
    utime and stime, `[13]` and `[14]` the reaped children's, in clock ticks."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
        line = stat.read()
    head, _, tail = line.rpartition(")")
    return head.partition("(")[2], tail.split()


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` in seconds (fields 14 and 15 of /proc/PID/stat), with its
    running children's (a server's helper processes, e.g. the signature worker)."""
    total = _ticks(pid)
    for child in children_of(pid):
        try:
            total += _ticks(child)
        except OSError:  # exited meanwhile
            continue
    return total / CLOCK_TICKS


def _ticks(pid: int | str) -> int:
    """utime + stime of `pid` (a process, or `PID/task/TID` for one thread), in clock ticks."""
    fields = process_stat(pid)[1]
    return int(fields[11]) + int(fields[12])


def children_of(pid: int) -> list[int]:
    """The ids of `pid`'s running child processes (from /proc/PID/task/*/children)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def load_average() -> str:
    """The 1/5/15-minute load averages, as /proc/loadavg gives them."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def cpu_counters() -> list[int] | None:
    """The machine's CPU time counters (the `cpu` line of /proc/stat, in clock ticks:
    user, nice, system, idle, iowait, irq, softirq, steal, …), or None off Linux."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            return [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None


def steal_share(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of the machine's CPU time between two `cpu_counters()` readings that
    the hypervisor gave to other guests (`steal`): on a shared virtual machine, the part
    of a slow run that is not this run's doing."""
    if before is None or after is None or len(before) < 8 or len(after) < 8:
        return None
    spent = [b - a for a, b in zip(before, after, strict=False)]
    total = sum(spent[:8])
    return round(spent[7] / total, 4) if total > 0 else None


def start_stateward(folder: str, name: str, env: dict[str, str] | None = None) -> Proc:
    """`stateward serve --port 0` with a fresh SQLite file and operator key in `folder`."""
    base = {
        "STATEWARD_DATABASE_URL": f"sqlite+aiosqlite:///{folder}/{name}.db",
        "STATEWARD_OPERATOR_KEY_FILE": f"{folder}/{name}-operator.json",
        "STATEWARD_BUS_URL": "memory://",
        **(env or {}),
    }
    return Proc([sys.executable, "-m", "stateward.cli", "serve", "--port", "0"], base, folder)


def env_pairs(items: list[str]) -> dict[str, str]:
    """`NAME=VALUE` command-line items as an environment (ValueError naming a bad item)."""
    env: dict[str, str] = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise ValueError(f"{item!r} is not NAME=VALUE")
        env[name] = value
    return env


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of `values` (seconds) in milliseconds, 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def median_range(values: list[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


# -- a lean HTTP/1.1 client --------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads whole responses."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = parts.path or "/"
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.head = (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\n{extra}Content-Length: "
        ).encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.used = 0.0

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def post(self, body: bytes) -> tuple[int, bytes]:
        """(status, body) of one POST."""
        if self.writer is not None and time.monotonic() - self.used > 2:
            self.close()  # the server may have dropped an idle keep-alive connection
        if self.writer is None:
            await self.open()
        self.used = time.monotonic()
        assert self.reader is not None and self.writer is not None
        self.writer.write(self.head + str(len(body)).encode() + b"\r\n\r\n" + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        at = lower.find(b"content-length:")
        if at < 0:
            if b"chunked" in lower:
                return status, await self._chunked()
            raise RuntimeError(f"response without a length: {head!r}")
        end = lower.index(b"\r\n", at)
        return status, await self.reader.readexactly(int(lower[at + 15 : end]))

    async def _chunked(self) -> bytes:
        assert self.reader is not None
        out = b""
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")  # the empty trailer line
                return out
            out += (await self.reader.readexactly(size + 2))[:-2]

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


async def hammer(
    url: str,
    clients: int,
    seconds: float,
    body_for: Callable[[int, int], bytes | None],
    headers: dict[str, str] | None = None,
    *,
    check: Callable[[int, bytes], None] | None = None,
) -> tuple[int, list[float]]:
    """`clients` connections POSTing for `seconds`; (completed requests, latencies in s).

    `body_for(client, n)` gives the n-th request body of a client (None: stop). A response
    that is not 200 or carries `"errors"` fails the run (`check` replaces that test).
    """
    latencies: list[float] = []
    conns = [Connection(url, headers) for _ in range(clients)]
    for conn in conns:
        await conn.open()
    deadline = time.perf_counter() + seconds

    def default_check(status: int, body: bytes) -> None:
        if status != 200 or b'"errors"' in body:
            raise RuntimeError(f"request failed ({status}): {body[:500]!r}")

    verify = check or default_check

    async def worker(index: int) -> None:
        conn = conns[index]
        n = 0
        while time.perf_counter() < deadline:
            request = body_for(index, n)
            if request is None:  # this client has nothing more to send
                break
            started = time.perf_counter()
            status, body = await conn.post(request)
            latencies.append(time.perf_counter() - started)
            verify(status, body)
            n += 1

    try:
        await asyncio.gather(*(worker(i) for i in range(clients)))
    finally:
        for conn in conns:
            conn.close()
    return len(latencies), latencies


async def gql(url: str, query: str, variables: dict[str, Any], token: str | None = None) -> Any:
    """`data` of one GraphQL request that must succeed (a fresh connection)."""
    conn = Connection(url, {"Authorization": f"Bearer {token}"} if token else None)
    try:
        status, raw = await conn.post(json.dumps({"query": query, "variables": variables}).encode())
    finally:
        conn.close()
    body = json.loads(raw)
    if status != 200 or body.get("errors"):
        raise RuntimeError(json.dumps(body.get("errors") or body))
    return body["data"]


async def login(url: str, key_file: str | Path) -> str:
    """A session token for the key in `key_file` (challenge signed with it)."""
    from stateward.governance.keys import read_key_file

    key = read_key_file(Path(key_file))
    data = await gql(url, "mutation($k:String!){authChallenge(publicKey:$k){challenge}}",
                     {"k": key.public})  # fmt: skip
    challenge = data["authChallenge"]["challenge"]
    data = await gql(
        url,
        "mutation($k:String!,$c:String!,$s:String!){authLogin(publicKey:$k,challenge:$c,"
        "signature:$s){token}}",
        {"k": key.public, "c": challenge, "s": key.sign(challenge.encode())},
    )
    return str(data["authLogin"]["token"])
