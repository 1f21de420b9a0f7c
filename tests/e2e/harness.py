"""End-to-end harness: real `stateward serve` processes, a GraphQL client, a ws subscriber.

- `ServerProcess`: runs `python -m stateward.cli serve --port 0 ...` with its own env,
  waits for `listening on http://HOST:PORT/graphql`, keeps every stdout line, and stops
  the process with SIGTERM (SIGKILL if it does not exit).
- `Client`: GraphQL over HTTP with a bearer token; `login(url, key)` gets a session
  token through `authChallenge`/`authLogin` with a real Ed25519 signature.
- `Subscriber`: a `graphql-transport-ws` websocket (the `websockets` package) that
  subscribes to `events` and collects every BusEvent in arrival order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import websockets

from stateward.governance.keys import KeyPair

LISTENING = re.compile(r"listening on (http://\S+/graphql)")
EVENT_FIELDS = (
    "id cursor type namespace workflow instanceId action fromState toState team assignmentId"
)


class ServerProcess:
    """One `stateward serve` process (see the module docstring)."""

    def __init__(self, *args: str, env: Mapping[str, str], cwd: Path) -> None:
        self.args = ["--port", "0", *args]
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
        self.cwd = cwd
        self.lines: list[str] = []
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None
        self._ready = threading.Event()

    def start(self, timeout: float = 60.0) -> ServerProcess:
        """Start the process and wait until it prints its URL (raises on failure)."""
        cmd = [sys.executable, "-m", "stateward.cli", "serve", *self.args]
        self.proc = subprocess.Popen(
            cmd, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, bufsize=1,
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(timeout) or not self.url:
            self.stop()
            raise RuntimeError("server did not start:\n" + "\n".join(self.lines[-40:]))
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            found = LISTENING.search(line)
            if found and not self.url:
                self.url = found.group(1)
                self._ready.set()
        self._ready.set()

    @property
    def ws_url(self) -> str:
        """The websocket URL of the GraphQL endpoint."""
        return "ws" + self.url[len("http") :]

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, wait, SIGKILL when needed; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def output(self) -> str:
        """Everything the process printed so far."""
        return "\n".join(self.lines)


class GraphQLError(AssertionError):
    """A GraphQL response carried errors."""


class Client:
    """GraphQL over HTTP against one server, with a bearer token."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(timeout=30)

    async def raw(self, query: str, variables: Mapping[str, Any] | None = None) -> Any:
        """The JSON response body."""
        body = {"query": query, "variables": dict(variables or {})}
        response = await self.http.post(self.url, json=body, headers=self.headers)
        return response.json()

    async def ok(self, query: str, variables: Mapping[str, Any] | None = None) -> Any:
        """`data` of a response that must have no errors."""
        body = await self.raw(query, variables)
        if body.get("errors"):
            raise GraphQLError(json.dumps(body["errors"], indent=1))
        return body["data"]

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        await self.http.aclose()


async def login(url: str, key: KeyPair) -> str:
    """A session token for `key`: sign the server's challenge, exchange it."""
    anon = Client(url)
    try:
        data = await anon.ok(
            "mutation($k:String!){authChallenge(publicKey:$k){challenge}}", {"k": key.public}
        )
        challenge = data["authChallenge"]["challenge"]
        data = await anon.ok(
            "mutation($k:String!,$c:String!,$s:String!){authLogin(publicKey:$k,challenge:$c,"
            "signature:$s){token}}",
            {"k": key.public, "c": challenge, "s": key.sign(challenge.encode())},
        )
    finally:
        await anon.close()
    return str(data["authLogin"]["token"])


class Subscriber:
    """A graphql-transport-ws subscription to `events`, collecting BusEvents in order."""

    def __init__(self, ws_url: str, token: str, variables: Mapping[str, Any]) -> None:
        self.ws_url = ws_url
        self.token = token
        self.variables = dict(variables)
        self.events: list[dict[str, Any]] = []
        self.errors: list[Any] = []
        self._task: asyncio.Task[None] | None = None
        self._acked = asyncio.Event()
        self._changed = asyncio.Event()

    async def start(self) -> Subscriber:
        """Connect, authenticate, subscribe; returns once the server acknowledged."""
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self._acked.wait(), 15)
        await asyncio.sleep(0.3)  # the subscribe frame is handled before events flow
        return self

    async def _run(self) -> None:
        query = (
            "subscription($f:EventFilter,$a:String){events(filter:$f,after:$a){"
            + EVENT_FIELDS
            + "}}"
        )
        async with websockets.connect(
            self.ws_url, subprotocols=[websockets.Subprotocol("graphql-transport-ws")]
        ) as ws:
            init = {"authorization": f"Bearer {self.token}"}
            await ws.send(json.dumps({"type": "connection_init", "payload": init}))
            ack = json.loads(await ws.recv())
            assert ack["type"] == "connection_ack", ack
            sub = {"query": query, "variables": self.variables}
            await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": sub}))
            self._acked.set()
            async for raw in ws:
                message = json.loads(raw)
                if message["type"] == "next":
                    payload = message["payload"]
                    if payload.get("errors"):
                        self.errors.append(payload["errors"])
                    else:
                        self.events.append(payload["data"]["events"])
                elif message["type"] == "error":
                    self.errors.append(message["payload"])
                elif message["type"] == "ping":
                    await ws.send(json.dumps({"type": "pong"}))
                self._changed.set()

    async def wait_for(self, predicate: Any, timeout: float = 20.0) -> list[dict[str, Any]]:
        """Wait until `predicate(events)` holds; returns the events (raises on timeout)."""
        deadline = time.monotonic() + timeout
        while not predicate(self.events):
            if self.errors:
                raise AssertionError(f"subscription errors: {self.errors}")
            if self._task is not None and self._task.done():
                self._task.result()
                raise AssertionError("subscription ended")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out; saw {[e['type'] for e in self.events]}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 0.5))
        return self.events

    async def close(self) -> None:
        """Close the socket."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task


def cursors(events: list[dict[str, Any]]) -> list[int]:
    """The cursors of `events`, in arrival order."""
    return [int(e["cursor"]) for e in events]
