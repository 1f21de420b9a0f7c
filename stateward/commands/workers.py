"""`stateward serve --workers N`: N worker processes behind one listening socket.

One stateward process uses one core (the event loop); `--workers N` binds the port once
and starts N worker processes (multiprocessing's `spawn`) that accept on it, as
`uvicorn --workers` or gunicorn do. Each worker is a full node on the same database — the
multi-node design already makes that safe (the sequencer, the outbox relay and the sweeps
coordinate through the database) — so it needs PostgreSQL: SQLite allows one writer at a
time, and N writers on one file only queue behind its lock (docs/decisions.md). Workers
share the node key file and see each other's events through a multi-node bus: when the bus
is `memory://`, the database's own LISTEN/NOTIFY bus is used.

The first worker starts alone (it migrates the database, bootstraps a new deployment and
runs `--demo`), the others once it is ready; then the supervisor prints
`listening on URL (N workers)`. A worker that dies is restarted (at most `MAX_RESTARTS` in
`RESTART_WINDOW` seconds, then everything stops with exit 1). SIGINT/SIGTERM stop every
worker gracefully (each gets one SIGTERM; workers run in their own process group so a
terminal's Ctrl-C reaches them only through the supervisor). With metrics on, the workers
write to one `PROMETHEUS_MULTIPROC_DIR` and `/metrics` shows their sum.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import queue
import signal
import socket
import sys
import tempfile
import time
from dataclasses import replace
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any
from urllib.parse import urlparse

from stateward.observe import metrics
from stateward.persistence.db import is_sqlite
from stateward.settings import Settings

log = logging.getLogger("stateward.serve")
MAX_RESTARTS = 5
RESTART_WINDOW = 60.0
STARTUP_TIMEOUT = 120.0


def supervise(settings: Settings, *, demo: bool = False) -> int:
    """Run `settings.workers` workers until SIGINT/SIGTERM; 0 on a clean stop, 1 when
    the settings refuse workers or the first worker cannot start."""
    problem = _refusal(settings)
    if problem:
        print(f"serve: {problem}", file=sys.stderr, flush=True)
        return 1
    settings = _worker_settings(settings)
    if (settings.metrics or settings.metrics_port is not None) and not os.environ.get(
        metrics.MULTIPROC_ENV
    ):
        os.environ[metrics.MULTIPROC_ENV] = tempfile.mkdtemp(prefix="stateward-metrics-")
    sock = _bind(settings.host, settings.port)
    pool = _Pool(settings, sock)
    previous = {sig: signal.signal(sig, pool.stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        url = pool.start_first(demo)
        if url is None:
            return 1
        if not pool.start_rest():
            return 1
        if settings.metrics_port is not None:
            from prometheus_client import start_http_server

            start_http_server(
                settings.metrics_port, addr=settings.host, registry=metrics.registry()
            )
            print(f"metrics on http://{urlparse(url).hostname}:{settings.metrics_port}/metrics")
        print(f"listening on {url} ({settings.workers} workers)", flush=True)
        return pool.watch()
    finally:
        pool.shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()


def _refusal(settings: Settings) -> str | None:
    """Why these settings can't run several workers, or None."""
    if settings.workers < 1:
        return f"--workers must be at least 1 (got {settings.workers})"
    if is_sqlite(settings.database_url):
        return (
            "--workers needs PostgreSQL: SQLite has one writer at a time, so more worker "
            "processes on one file would only wait for each other (run one process, or use "
            "STATEWARD_DATABASE_URL=postgresql+asyncpg://...)"
        )
    return None


def _worker_settings(settings: Settings) -> Settings:
    """The settings every worker runs with: a bus all of them share."""
    if urlparse(settings.bus_url).scheme == "memory":
        print(
            "serve: several workers share the database's LISTEN/NOTIFY bus "
            "(STATEWARD_BUS_URL=memory:// is one process only)",
            file=sys.stderr,
            flush=True,
        )
        return replace(settings, bus_url=settings.database_url)
    return settings


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket every worker accepts on (port 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class _Pool:
    """The worker processes and their lifecycle (see the module docstring)."""

    def __init__(self, settings: Settings, sock: socket.socket) -> None:
        self.settings = settings
        self.sock = sock
        self.ctx = multiprocessing.get_context("spawn")
        self.ready: Any = self.ctx.Queue()
        self.workers: dict[int, BaseProcess] = {}
        self.restarts: list[float] = []
        self.stopping = False

    def stop(self, sig: int, frame: FrameType | None) -> None:
        """SIGINT/SIGTERM: stop watching; `shutdown` then stops the workers."""
        self.stopping = True

    def _spawn(self, index: int, demo: bool) -> None:
        proc = self.ctx.Process(
            target=worker_main,
            args=(self.settings, self.sock, demo, index, self.ready),
            name=f"stateward-worker-{index}",
        )
        proc.start()
        self.workers[index] = proc

    def _await_ready(self, indexes: set[int]) -> str | None:
        """Wait until the workers `indexes` are serving; their URL, or None when one died."""
        url = ""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        waiting = set(indexes)
        while waiting and not self.stopping and time.monotonic() < deadline:
            try:
                index, url = self.ready.get(timeout=0.2)
                waiting.discard(index)
            except queue.Empty:
                dead = [i for i in waiting if not self.workers[i].is_alive()]
                if dead:
                    print(f"serve: worker {dead[0]} did not start", file=sys.stderr, flush=True)
                    return None
        return url if not waiting else None

    def start_first(self, demo: bool) -> str | None:
        """Start worker 0 alone (migrations, bootstrap, demo); its URL when ready."""
        self._spawn(0, demo)
        return self._await_ready({0})

    def start_rest(self) -> bool:
        """Start workers 1..N-1; True when all are serving."""
        for index in range(1, self.settings.workers):
            self._spawn(index, False)
        return self._await_ready(set(range(1, self.settings.workers))) is not None

    def watch(self) -> int:
        """Restart workers that die until stopped; 0 on a stop, 1 when they keep dying."""
        while not self.stopping:
            time.sleep(0.2)
            for index, proc in list(self.workers.items()):
                if proc.is_alive() or self.stopping:
                    continue
                log.warning("worker %d (pid %s) exited with %s", index, proc.pid, proc.exitcode)
                metrics.process_exited(proc.pid)
                now = time.monotonic()
                self.restarts = [t for t in self.restarts if now - t < RESTART_WINDOW] + [now]
                if len(self.restarts) > MAX_RESTARTS:
                    print("serve: workers keep exiting; stopping", file=sys.stderr, flush=True)
                    return 1
                self._spawn(index, False)
        return 0

    def shutdown(self) -> None:
        """One SIGTERM to each live worker, wait out the grace, SIGKILL what is left."""
        alive = [p for p in self.workers.values() if p.is_alive()]
        for proc in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid or 0, signal.SIGTERM)
        deadline = time.monotonic() + self.settings.shutdown_grace + 2
        for proc in alive:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5)
            metrics.process_exited(proc.pid)


def worker_main(
    settings: Settings, sock: socket.socket, demo: bool, index: int, ready: Any
) -> None:
    """One worker process: serve on the supervisor's socket, report readiness."""
    os.setpgrp()  # Ctrl-C on a terminal reaches the supervisor, which stops us once
    from stateward.commands.serve import loop_factory, serve
    from stateward.observe import tracing
    from stateward.observe.logs import configure_logging

    configure_logging(batched=True)
    tracing.configure_from_env()

    def on_ready(url: str) -> None:
        ready.put((index, url))

    code = 1
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            code = runner.run(serve(settings, demo=demo, sockets=[sock], on_ready=on_ready))
    except KeyboardInterrupt:
        code = 0
    finally:
        tracing.shutdown()
    sys.exit(code)
