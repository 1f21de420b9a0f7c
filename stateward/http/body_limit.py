"""Request-size limit as a pure ASGI middleware: 413 before the body is buffered.

A request whose `Content-Length` exceeds the limit never reaches the app. A streamed
(chunked) body is counted chunk by chunk as the app reads it; the chunk that crosses the
limit is never handed to the app, which is unwound, and the client gets 413 (if no
response has started yet). Nothing is buffered.

Before answering, the rest of the upload is read and DISCARDED (up to `drain_bytes`,
within `drain_seconds`): an ASGI server closes the connection after an early response,
and closing with unread data makes the kernel reset it, so a client still uploading
(httpx, requests) would see "connection reset" instead of the 413. Beyond that budget the
413 is sent anyway. Websocket messages larger than the limit close the socket with 1009.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"


class _BodyTooLarge(Exception):
    """Raised inside the app's `receive()` when the streamed body crosses the limit."""


def payload_too_large_body(limit: int) -> bytes:
    """The JSON error body of a 413: a GraphQL-style `errors` list with a stable code."""
    error = {
        "message": f"request body exceeds {limit} bytes",
        "extensions": {"code": PAYLOAD_TOO_LARGE, "maxBytes": limit},
    }
    return json.dumps({"errors": [error]}).encode()


class BodyLimitMiddleware:
    """Refuse HTTP bodies (and websocket messages) larger than `max_body_bytes`."""

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        *,
        drain_bytes: int = 8 * 1024 * 1024,
        drain_seconds: float = 5.0,
    ) -> None:
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be positive")
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.drain_bytes = drain_bytes
        self.drain_seconds = drain_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Dispatch by scope type; lifespan passes straight through."""
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.app(scope, self._limit_ws_receive(receive, send), send)
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.max_body_bytes
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            if declared <= limit + self.drain_bytes:
                await self._drain(receive)
            await self._reject(send)
            return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if started:
                raise
            await self._drain(receive)
            await self._reject(send)

    async def _drain(self, receive: Receive) -> None:
        """Read and discard what is left of the body, within the drain budget."""

        async def discard() -> None:
            seen = 0
            while seen <= self.drain_bytes:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return
                seen += len(message.get("body", b""))

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(discard(), timeout=self.drain_seconds)

    async def _reject(self, send: Send) -> None:
        body = payload_too_large_body(self.max_body_bytes)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _limit_ws_receive(self, receive: Receive, send: Send) -> Receive:
        limit = self.max_body_bytes

        async def limited_receive() -> Message:
            message = await receive()
            if message["type"] == "websocket.receive":
                size = _ws_size(message, limit)
                if size > limit:
                    reason = f"{PAYLOAD_TOO_LARGE}: message exceeds {limit} bytes"
                    await send({"type": "websocket.close", "code": 1009, "reason": reason})
                    return {"type": "websocket.disconnect", "code": 1009}
            return message

        return limited_receive


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _ws_size(message: Message, limit: int) -> int:
    """Size in bytes of a websocket message (only encodes text that might be too big)."""
    text = message.get("text") or ""
    text_size = len(text.encode()) if len(text) * 4 > limit else len(text)
    return len(message.get("bytes") or b"") + text_size
