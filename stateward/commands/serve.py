"""`stateward serve [--db URL] [--host H] [--port P] [--bus URL] [--demo]`: run a node.

Settings come from the environment (STATEWARD_*), flags override them. The server is
uvicorn running `create_app(settings)`; once its startup has completed (database
migrated, genesis ensured, bus subscribed; with `--demo` also the examples loaded) it
prints `listening on http://HOST:PORT/graphql` — with the real port when `--port 0`
asked for a free one. SIGINT/SIGTERM stop it gracefully (exit 0). The event loop is
uvloop's when it is installed (`loop_factory`).

Transport limits are uvicorn's own options (`uvicorn_options`): a websocket message
larger than STATEWARD_MAX_BODY_BYTES is refused with 1009 while it is read, never
buffered (uvicorn's default is 16 MiB); uvicorn's proxy-header handling is off, so
`X-Forwarded-For` is read only by the app, and only from STATEWARD_TRUSTED_PROXIES
(uvicorn would otherwise rewrite the client address for any peer on 127.0.0.1).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import uvicorn
from prometheus_client import start_http_server

from stateward.app import create_app
from stateward.commands.affinity import AffinityError, format_cpus, pin_server
from stateward.http.http_protocol import CoalescingHttpToolsProtocol
from stateward.http.ws_protocol import FrameWriterProtocol
from stateward.observe import metrics, tracing
from stateward.observe.logs import configure_logging
from stateward.settings import Settings

log = logging.getLogger("stateward.serve")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the environment with the command-line flags applied on top."""
    return Settings.from_env(
        database_url=getattr(args, "db", None),
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
        bus_url=getattr(args, "bus", None),
        mode=getattr(args, "mode", None),
        node_key_file=getattr(args, "node_key_file", None),
        metrics_port=getattr(args, "metrics_port", None),
        workers=getattr(args, "workers", None),
    )


class _Server(uvicorn.Server):
    """uvicorn's server, except that SIGINT/SIGTERM end it with exit code 0.

    uvicorn re-raises a captured signal after its graceful shutdown (so the process dies
    of it); a stopped `stateward serve` should instead exit normally. A second signal
    forces the exit without waiting for open connections.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Handle SIGINT/SIGTERM as 'stop gracefully' while serving."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self._stop) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def __init__(self, config: uvicorn.Config, app: Any, grace: float) -> None:
        super().__init__(config)
        self.app = app
        self.grace = grace
        self._watchdog: threading.Timer | None = None

    def _stop(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:
            self.force_exit = True
        self.should_exit = True
        if self._watchdog is None:  # whatever hangs, the process is gone within the grace
            self._watchdog = threading.Timer(self.grace, _overdue, (self.grace,))
            self._watchdog.daemon = True
            self._watchdog.start()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Graceful stop: no new connections, websockets closed with 1001 (not uvicorn's
        1012), in-flight requests finished (uvicorn waits for them), then the lifespan."""
        for server in self.servers:
            server.close()
        self.app.state.lifecycle = "stopping"
        close = getattr(self.app.state, "close_websockets", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(close(), timeout=1.0)
        await super().shutdown(sockets)


def _overdue(grace: float) -> None:
    """The shutdown took longer than `STATEWARD_SHUTDOWN_GRACE`: exit now."""
    print(f"serve: shutdown exceeded {grace:g} s; exiting", file=sys.stderr, flush=True)
    os._exit(1)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; 0 on a clean stop, 1 when startup fails."""
    configure_logging(batched=True)
    settings = settings_from_args(args)
    if settings.server_cpus:  # first: the threads and processes started later inherit it
        if settings.workers != 1:
            print("serve: STATEWARD_SERVER_CPUS keeps one server process on its CPUs; it "
                  "cannot be combined with --workers", file=sys.stderr)  # fmt: skip
            return 1
        try:
            mine, rest = pin_server(settings.server_cpus)
        except AffinityError as error:
            print(f"serve: {error}", file=sys.stderr)
            return 1
        log.info("event loop and database threads on CPU %s; signature checks on %s",
                 format_cpus(mine), format_cpus(rest) or "the same CPUs")  # fmt: skip
    if settings.workers != 1:
        from stateward.commands.workers import supervise

        return supervise(settings, demo=bool(getattr(args, "demo", False)))
    tracing.configure_from_env()
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            return runner.run(serve(settings, demo=bool(getattr(args, "demo", False))))
    except KeyboardInterrupt:
        return 0
    finally:
        tracing.shutdown()


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (it comes with `uvicorn[standard]`): the
    server's loop, as uvicorn itself would pick it; else None (asyncio's own loop)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvicorn[standard] installs it on CPython
        return None
    return uvloop.new_event_loop


async def serve(
    settings: Settings,
    *,
    demo: bool = False,
    sockets: list[socket.socket] | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> int:
    """Run uvicorn with the app for `settings`; announce readiness once started.

    A worker of `serve --workers N` passes the supervisor's listening `sockets` and an
    `on_ready(url)` that tells the supervisor instead of printing `listening on`."""
    app = create_app(settings)
    if settings.metrics_port is not None and sockets is None:
        start_http_server(settings.metrics_port, addr=settings.host, registry=metrics.registry())
    config = uvicorn.Config(app, **uvicorn_options(settings))
    server = _Server(config, app, settings.shutdown_grace)
    announcer = asyncio.create_task(_announce(server, app, settings, demo, on_ready))
    try:
        await server.serve(sockets=sockets)
    finally:
        announcer.cancel()
        with contextlib.suppress(BaseException):
            await announcer
    if not server.started:
        print("serve: the server did not start (see the errors above)", file=sys.stderr)
        return 1
    return 0


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The uvicorn.Config keyword arguments for `settings` (see the module docstring)."""
    return {
        "host": settings.host,
        "port": settings.port,
        "lifespan": "on",
        "log_level": "warning",
        "log_config": None,  # uvicorn logs through our root handler (JSON when asked)
        "access_log": False,  # each GraphQL operation has its own line (observe.graphql)
        # httptools, writing a response's head and body with one write (`http_protocol`)
        "http": CoalescingHttpToolsProtocol,
        # websockets-sansio, plus a synchronous frame writer for the fan-out
        "ws": FrameWriterProtocol,
        "ws_max_size": settings.max_body_bytes,
        "ws_per_message_deflate": settings.ws_deflate,
        "proxy_headers": False,
        "server_header": False,
        # In-flight requests get most of the shutdown grace; the lifespan stop the rest.
        "timeout_graceful_shutdown": max(1, int(settings.shutdown_grace * 0.6)),
    }


async def _announce(
    server: uvicorn.Server,
    app: Any,
    settings: Settings,
    demo: bool,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Wait for uvicorn's startup, run the demo if asked, freeze the startup heap
    (`freeze_heap`, and again once warm), print where to connect."""
    while not server.started:
        if server.should_exit:
            return
        await asyncio.sleep(0.02)
    host, port = _bound(server, settings)
    url = f"http://{host}:{port}/graphql"
    services = app.state.services
    boot = getattr(services, "bootstrap", None)
    if boot is not None and boot.created:
        key = boot.operator_key_file.resolve()
        print(f"initialized a new deployment; operator key: {key}", flush=True)
    if demo:
        try:
            await _demo(services, url)
        except Exception as error:
            log.exception("the demo could not be loaded")
            print(f"serve: --demo failed: {error}", file=sys.stderr, flush=True)
            server.should_exit = True
            return
    freeze_heap()  # the startup heap: modules, schema, grammars, the runtime
    asyncio.get_running_loop().call_later(WARM_FREEZE_AFTER, freeze_heap)  # + warm caches
    if on_ready is not None:
        on_ready(url)
        return
    if settings.metrics_port is not None:
        print(f"metrics on http://{host}:{settings.metrics_port}/metrics", flush=True)
    elif settings.metrics:
        print(f"metrics on http://{host}:{port}/metrics", flush=True)
    print(f"listening on {url}", flush=True)


#: Seconds after startup when the heap is frozen a second time, once the first requests
#: have built the lazily filled caches (parsed documents, compiled SQL, Strawberry's).
WARM_FREEZE_AFTER = 10.0


#: The collector's thresholds in a server (CPython's are 700, 10, 10): the objects of
#: the requests in flight crossed 700 about every fourth request, and each young
#: collection walked them; requests leave no cycles (docs/decisions.md, "Requests leave
#: no reference cycles"), so collecting less often frees no less.
SERVER_GC_THRESHOLDS = (10_000, 20, 10)


def freeze_heap() -> None:
    """Collect, then move every object alive now to the collector's permanent generation
    (`gc.freeze`): a server's long-lived heap (modules, the schema, grammars, caches) is
    then never walked again by the full collections that request garbage triggers. That
    walk was about a fifth of a `performAction`'s CPU (docs/performance.md). Objects frozen
    here are still freed by reference counting; only a cycle among them would be kept.
    Also sets `SERVER_GC_THRESHOLDS` (≈ 3–5 % of the server's CPU per request)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVER_GC_THRESHOLDS)


async def _demo(services: Any, url: str) -> None:
    from stateward.runtime.container import operator_key_path
    from stateward.runtime.demo import describe, load_demo_from_file

    key_file = operator_key_path(services.settings)
    if not key_file.exists():
        raise FileNotFoundError(
            f"--demo deploys as the operator key {key_file}, which does not exist "
            "(set STATEWARD_OPERATOR_KEY_FILE to the key given to `stateward init`)"
        )
    result = await load_demo_from_file(services.runtime, key_file)
    print(describe(result, url), flush=True)


def _bound(server: uvicorn.Server, settings: Settings) -> tuple[str, int]:
    """The address uvicorn actually listens on (the real port when asked for port 0)."""
    for srv in getattr(server, "servers", []) or []:
        for sock in getattr(srv, "sockets", []) or []:
            name = sock.getsockname()
            host = settings.host if settings.host not in ("0.0.0.0", "::") else "127.0.0.1"
            return (f"[{host}]" if ":" in host else host), int(name[1])
    return settings.host, settings.port
