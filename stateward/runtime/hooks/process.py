"""One hook worker subprocess: JSON lines over pipes, death detection, stderr tail.

Owned by `HookRunner` (one request in flight per worker). A worker that dies is reported
as `WorkerDied` with a guess of whether its memory limit killed it (the Rust allocator
prints "memory allocation of N bytes failed" before aborting).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
from typing import Any

MEMORY_MARKERS = ("memory allocation of", "MemoryError", "out of memory")


class WorkerDied(Exception):
    """The worker process ended (or broke the protocol) while serving a request."""

    def __init__(self, reason: str, memory: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.memory = memory


class WorkerProcess:
    """A running `hook_worker` subprocess and the hashes of the modules it has compiled."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.known: set[str] = set()
        self._next_id = 0
        self._killed = False
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._drain = asyncio.create_task(self._read_stderr())

    @classmethod
    async def start(cls, args: list[str], line_limit: int) -> WorkerProcess:
        """Spawn a worker; `line_limit` bounds one protocol line (the largest result)."""
        # Nothing of the server's environment (database URLs, keys) reaches the worker.
        env = {"PATH": os.environ.get("PATH", ""), "RUST_BACKTRACE": "0", "LC_ALL": "C.UTF-8"}
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            limit=line_limit,
        )
        return cls(proc)

    @property
    def alive(self) -> bool:
        """True while the process runs and has not been killed by us."""
        return not self._killed and self.proc.returncode is None

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        with contextlib.suppress(Exception):
            async for raw in self.proc.stderr:
                self._stderr.append(raw.decode("utf-8", "replace").rstrip())

    async def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait for its reply; TimeoutError after `timeout` seconds."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._next_id += 1
        line = json.dumps({**message, "id": self._next_id}, ensure_ascii=False, allow_nan=False)
        try:
            self.proc.stdin.write(line.encode("utf-8") + b"\n")
            await self.proc.stdin.drain()
            raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        except (BrokenPipeError, ConnectionResetError):
            raise await self._death() from None
        except ValueError:  # a line over the limit: the worker broke the protocol
            await self.kill()
            raise WorkerDied("reply too large", memory=False) from None
        if not raw:
            raise await self._death()
        reply: dict[str, Any] = json.loads(raw)
        if reply.get("id") != self._next_id:
            await self.kill()
            raise WorkerDied("reply out of order", memory=False)
        return reply

    async def _death(self) -> WorkerDied:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 5)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._drain), 1)
        code = self.proc.returncode
        if code is not None and code < 0:
            try:
                reason = f"signal {signal.Signals(-code).name}"
            except ValueError:
                reason = f"signal {-code}"
        else:
            reason = f"exit code {code}"
        tail = "\n".join(self._stderr)
        memory = any(m in tail for m in MEMORY_MARKERS) or code == -signal.SIGKILL
        self._killed = True
        return WorkerDied(reason, memory)

    async def kill(self) -> None:
        """Kill the process now and reap it."""
        self._killed = True
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        await self._reap()

    async def stop(self) -> None:
        """Close stdin (the worker exits on EOF); kill it if it lingers."""
        self._killed = True
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 2)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        await self._reap()

    async def _reap(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 5)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(self._drain, 1)
