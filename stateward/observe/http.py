"""HTTP pieces: the request-id and server-span middlewares, the `/metrics` endpoint and
its gauge sampler.

`RequestIdMiddleware` gives every HTTP request and websocket an id (the caller's
`X-Request-ID` when it is plain and short, else a random one), keeps it in
`context.request_id` for log lines and error extensions, and returns it in the
`X-Request-ID` response header.

`ServerSpanMiddleware` (installed while tracing is on) gives every HTTP request and
websocket a SERVER span, the parent of the GraphQL spans; an HTTP request's span is
offered to its GraphQL operation (`tracing.claim_request_span`), which records itself on
it rather than on a span of its own. It replaces OpenTelemetry's
ASGI middleware, which gathered the request's attributes, parsed its URL and set up its
own metric instruments before the sampler decided, ≈ 80 µs per request recorded or not
(issue 17): this one extracts the W3C `traceparent` (the global propagator, so
`OTEL_PROPAGATORS` still applies) only when such a header came, asks the sampler with
the span name alone, and builds the HTTP semantic-convention attributes
(`http.request.method`, `url.scheme`, `url.path`, `http.route`, `server.address`,
`server.port`, `client.address`, `client.port`, `network.protocol.version`,
`user_agent.original`, `http.response.status_code`, `error.type`) only for a span that
records. `url.query` is left out: it may carry a secret and stateward's API takes none.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stateward.observe import context, metrics, tracing

HEADER = b"x-request-id"
SAMPLE_INTERVAL = 2.0


class RequestIdMiddleware:
    """Pure ASGI middleware (websockets pass through it too; see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        offered = None
        for name, value in scope.get("headers") or ():
            if name == HEADER:
                offered = value  # the last one, as a dict of the headers kept
        rid = context.new_request_id(offered.decode("latin-1") if offered else None)
        token = context.request_id.set(rid)
        header = (HEADER, rid.encode("latin-1"))

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*(message.get("headers") or ()), header]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            context.request_id.reset(token)


_METHODS = frozenset(
    {"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"}
)


class ServerSpanMiddleware:
    """A SERVER span per HTTP request and websocket (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracer = tracing.tracer()
        kind = scope["type"]
        if tracer is None or kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET") if kind == "http" else "GET"
        if method not in _METHODS:
            method = "_OTHER"
        parent = _parent_context(scope)
        span = tracer.start_span(method, context=parent, kind=SpanKind.SERVER)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        offer = tracing.offer_request_span(span) if kind == "http" else None
        recording = span.is_recording()
        status: list[int] = []
        if recording:
            span.set_attributes(_request_attributes(scope, method))

            async def send_status(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status.append(message["status"])
                await send(message)

        try:
            await self.app(scope, receive, send_status if recording else send)
        except Exception as error:
            if recording:
                span.record_exception(error)
                span.set_attribute("error.type", type(error).__qualname__)
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            raise
        finally:
            if recording:
                _finish(span, scope, method, status[0] if status else None)
            if offer is not None:
                tracing.end_request_offer(offer)
            otel_context.detach(token)
            span.end()


def _parent_context(scope: Scope) -> otel_context.Context | None:
    """The caller's trace context when a propagation header came (else None: the span
    is a root, or the child of an ambient one)."""
    global _fields_of
    propagator = propagate.get_global_textmap()
    if _fields_of[0] is not propagator:  # `fields` builds a new set on every read
        _fields_of = (propagator, frozenset(f.encode("latin-1") for f in propagator.fields))
    fields = _fields_of[1]
    carrier: dict[str, str] = {}
    for name, value in scope.get("headers") or ():
        if name in fields:
            key, text = name.decode("latin-1"), value.decode("latin-1")
            carrier[key] = f"{carrier[key]},{text}" if key in carrier else text
    return propagator.extract(carrier) if carrier else None


_fields_of: tuple[object, frozenset[bytes]] = (None, frozenset())


def _request_attributes(scope: Scope, method: str) -> dict[str, Any]:
    """The HTTP server semantic-convention attributes of a request (recorded spans only)."""
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "url.scheme": scope.get("scheme", "http"),
        "url.path": scope.get("path", ""),
    }
    if method == "_OTHER":
        attributes["http.request.method_original"] = scope.get("method", "")
    version = scope.get("http_version")
    if version:
        attributes["network.protocol.version"] = version
    server = scope.get("server")
    host = None
    for name, value in scope.get("headers") or ():
        if name == b"host":
            host = value.decode("latin-1")
        elif name == b"user-agent":
            attributes["user_agent.original"] = value.decode("latin-1")
    if host:
        address, port = _split_host(host)
        attributes["server.address"] = address
        if port is not None:
            attributes["server.port"] = port
    elif server:
        attributes["server.address"] = str(server[0])
    if "server.port" not in attributes and server and server[1] is not None:
        attributes["server.port"] = int(server[1])
    client = scope.get("client")
    if client:
        attributes["client.address"] = str(client[0])
        if client[1] is not None:
            attributes["client.port"] = int(client[1])
    return attributes


def _split_host(host: str) -> tuple[str, int | None]:
    """A `Host` header's address and port (`[::1]:8000`, `example.org`)."""
    if host.startswith("["):
        end = host.find("]")
        address, rest = host[1:end], host[end + 1 :]
        port = rest[1:] if rest.startswith(":") else ""
    else:
        address, _, port = host.partition(":")
    return address, int(port) if port.isdigit() else None


def _route(scope: Scope) -> str | None:
    """The path template of the route that handled the request (after routing)."""
    for route in getattr(scope.get("router"), "routes", ()):
        match, _ = route.matches(scope)
        if match == Match.FULL:
            path = str(getattr(route, "path", ""))
            return f"{path}/{{path}}" if isinstance(route, Mount) else path or None
    return None


def _finish(span: Any, scope: Scope, method: str, status: int | None) -> None:
    """Name the recorded span after its route and set what the response said."""
    route = _route(scope)
    if route:
        span.set_attribute("http.route", route)
        span.update_name(f"{method} {route}")
    if status is not None:
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_attribute("error.type", str(status))
            span.set_status(Status(StatusCode.ERROR))


async def metrics_endpoint(request: Request) -> Response:
    """`GET /metrics`: the Prometheus text format (gauges sampled first)."""
    metrics.sample(getattr(request.app.state, "services", None))
    return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


@contextlib.asynccontextmanager
async def sampling(services: Any, interval: float = SAMPLE_INTERVAL) -> AsyncIterator[None]:
    """Keep the gauges fresh while the block runs (for `--metrics-port` and multi-process
    scrapes, which do not pass through this process's `/metrics`)."""
    if not metrics.enabled():
        yield
        return

    async def loop() -> None:
        while True:
            with contextlib.suppress(Exception):
                metrics.sample(services)
            await asyncio.sleep(interval)

    task = asyncio.create_task(loop(), name="stateward-metrics-sampler")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        metrics.process_exited()
