"""HTTP pieces: the request-id middleware, the `/metrics` endpoint and its gauge sampler.

`RequestIdMiddleware` gives every HTTP request and websocket an id (the caller's
`X-Request-ID` when it is plain and short, else a random one), keeps it in
`context.request_id` for log lines and error extensions, and returns it in the
`X-Request-ID` response header.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stateward.observe import context, metrics

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
        offered = dict(scope.get("headers") or []).get(HEADER)
        rid = context.new_request_id(offered.decode("latin-1") if offered else None)
        token = context.request_id.set(rid)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                headers.append((HEADER, rid.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            context.request_id.reset(token)


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
