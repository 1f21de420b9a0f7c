"""A batch's Ed25519 checks in a helper process: the second core verifies while the event
loop goes on with other work.

`submitEvents` brings up to 1,000 client-signed envelopes in one request; libsodium's
check is ≈ 57 µs each, done on the event loop's thread one after the other. A worker
THREAD does not help: cffi releases the GIL during the C call, but the worker must take
it back after each signature, and with the event loop busy in Python that waits for the
switch interval (measured: 100 checks ≈ 8 ms alone, ≈ 51 ms beside a busy thread). A
process has its own GIL: the batch goes over a pipe in one write (≈ 0.5 KB per
envelope), the answers come back as one byte each, read by the event loop like any
socket.

What is checked is exactly `keys.verify_signature`: the strict parts (public key of
prime order, canonical b64url signature, S < L, small-order R) run here, in the caller,
before anything is sent (`keys.signature_parts`); the worker runs the same libsodium
call (`keys.verify_detached`) on the same bytes. A worker that cannot start, dies or
answers nonsense is given up, and the caller checks inline as before (`None` answers):
a signature is never taken as valid without a check.

Wire format (both ways, in order, one answer per request): request = count (4 bytes,
big-endian), then per item: public key (32), signature (64), message length (4), message;
answer = `count` bytes, 1 = valid.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
import struct
import sys
from collections.abc import Sequence
from typing import BinaryIO, cast

from stateward.governance.keys import signature_parts, verify_detached
from stateward.settings import cpu_list

log = logging.getLogger(__name__)
#: Fewer envelopes than this are checked inline (the pipe costs more than it saves).
MIN_BATCH = 16
_HEAD = struct.Struct(">I")
#: Environment variable: `0` keeps every check on the event loop's thread.
ENV = "STATEWARD_SIGNATURE_WORKER"
#: Environment variable set by `stateward serve` when STATEWARD_SERVER_CPUS keeps the
#: server on some CPUs (`commands/affinity.py`): the others, as `0,2,3`; the helper
#: process moves itself there, so the checks run beside the event loop, not on its CPU.
WORKER_CPUS_ENV = "STATEWARD_SIGNATURE_WORKER_CPUS"


def worker_enabled() -> bool:
    """A helper process pays only where a second core can run it: CPUs `stateward serve`
    set apart for it (`WORKER_CPUS_ENV`), or two or more this process may use; never when
    turned off with `STATEWARD_SIGNATURE_WORKER=0`."""
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if worker_cpus():  # the server keeps to its CPUs and set these apart for the helper
        return True
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        cores = os.cpu_count() or 1
    return cores >= 2


class _Pipe(asyncio.SubprocessProtocol):
    """The parent's side: answers are matched to requests in order."""

    def __init__(self, worker: SignatureWorker) -> None:
        self.worker = worker
        self.buffer = bytearray()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd != 1:
            return
        self.buffer += data
        pending = self.worker.pending
        while pending and len(self.buffer) >= pending[0][0]:
            count, future = pending.popleft()
            answer = bytes(self.buffer[:count])
            del self.buffer[:count]
            if not future.done():
                future.set_result(answer)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.worker.broken("its output closed")

    def process_exited(self) -> None:
        self.worker.broken("it exited")


class SignatureWorker:
    """One helper process per event loop (started on first use); see the module."""

    def __init__(self) -> None:
        self.transport: asyncio.SubprocessTransport | None = None
        self.pending: collections.deque[tuple[int, asyncio.Future[bytes]]] = collections.deque()
        self.starting: asyncio.Task[None] | None = None
        #: Why the worker was given up (then every check is inline), else None.
        self.failed: str | None = None
        #: Signatures checked by the worker (tests and the bench).
        self.checked = 0

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.subprocess_exec(
            lambda: _Pipe(self),
            sys.executable,
            "-m",
            "stateward.governance.sigworker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,
        )
        self.transport = transport

    def broken(self, why: str) -> None:
        """Give the worker up: pending callers check inline."""
        if self.failed is None:
            self.failed = why
            log.warning("signature worker given up (%s); checking signatures inline", why)
        while self.pending:
            _, future = self.pending.popleft()
            if not future.done():
                future.set_exception(ConnectionError(f"signature worker: {why}"))
        self.close()

    def close(self) -> None:
        """Stop the helper process (its stdin closes: it exits)."""
        if self.failed is None:
            self.failed = "closed"
        transport, self.transport = self.transport, None
        if transport is not None:
            transport.close()

    async def check(self, items: Sequence[tuple[str, bytes, str]]) -> list[bool] | None:
        """`keys.verify_signature(signer, message, signature)` of each item, or None when
        the worker is not available (the caller then checks inline)."""
        if self.failed is not None:
            return None
        parts = [signature_parts(*item) for item in items]
        chunks = [_HEAD.pack(len(parts))]
        for part in parts:
            if part is not None:
                public, signature, message = part
                chunks += (public, signature, _HEAD.pack(len(message)), message)
            else:  # refused by the strict checks: a placeholder the worker refuses too
                chunks += (bytes(32), bytes(64), _HEAD.pack(0))
        try:
            if self.transport is None:
                if self.starting is None:
                    self.starting = asyncio.ensure_future(self._start())
                await asyncio.shield(self.starting)
            transport = self.transport
            if transport is None or self.failed is not None:
                return None
            stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
            future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
            self.pending.append((len(parts), future))
            stdin.write(b"".join(chunks))
            answer = await future
        except Exception as error:  # any failure: inline from now on
            self.broken(f"{type(error).__name__}: {error}")
            return None
        if len(answer) != len(parts) or any(byte > 1 for byte in answer):
            self.broken("an answer of the wrong shape")
            return None
        self.checked += len(parts)
        return [part is not None and byte == 1 for part, byte in zip(parts, answer, strict=True)]


def serve(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """The helper process: answer requests until stdin closes."""
    source = stdin if stdin is not None else sys.stdin.buffer
    sink = stdout if stdout is not None else sys.stdout.buffer
    read, write, flush = source.read, sink.write, sink.flush
    zero = bytes(32)
    while True:
        head = read(4)
        if len(head) < 4:
            return
        (count,) = _HEAD.unpack(head)
        answer = bytearray(count)
        for n in range(count):
            fixed = read(100)
            if len(fixed) < 100:
                return
            (length,) = _HEAD.unpack_from(fixed, 96)
            message = read(length) if length else b""
            if len(message) < length:
                return
            public, signature = fixed[:32], fixed[32:96]
            if public != zero and verify_detached(signature, message, public):
                answer[n] = 1
        write(bytes(answer))
        flush()


def worker_cpus() -> set[int]:
    """The CPUs `stateward serve` set apart for the helper (`WORKER_CPUS_ENV`), or none
    (also when the variable holds no CPU list)."""
    try:
        return set(cpu_list(WORKER_CPUS_ENV, os.environ.get(WORKER_CPUS_ENV, "")))
    except ValueError:
        return set()


def main() -> None:
    """The helper process's entry: on the CPUs set apart for it, if any (inherited, it
    would run on the server's own); Ctrl-C in a terminal reaches the whole process group;
    the server shuts down and closes our stdin, so the interrupt is left to it (no
    traceback here), and a parent gone mid-answer ends the loop quietly."""
    cpus = worker_cpus()
    if cpus:
        with contextlib.suppress(AttributeError, OSError):  # gone since: stay where we are
            os.sched_setaffinity(0, cpus)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(BrokenPipeError):
        serve()


if __name__ == "__main__":  # pragma: no cover - run as the helper process
    main()
