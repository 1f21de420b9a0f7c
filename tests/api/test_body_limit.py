"""The request-size limit: 413 with a JSON code, the app never sees the excess, no buffering."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import httpx
import uvicorn
from api_app import make_app
from starlette.types import Message, Receive, Scope, Send

from stateward.http.body_limit import PAYLOAD_TOO_LARGE, BodyLimitMiddleware


class RecordingApp:
    """An inner ASGI app that reads the whole body and records how much it got."""

    def __init__(self) -> None:
        self.calls = 0
        self.bytes_seen = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls += 1
        more = True
        while more:
            message: Message = await receive()
            self.bytes_seen += len(message.get("body", b""))
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _chunks(n: int, size: int, counter: list[int]) -> AsyncIterator[bytes]:
    async def gen() -> AsyncIterator[bytes]:
        for _ in range(n):
            counter.append(size)
            yield b" " * size

    return gen()


async def _post(app, content, headers=None) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        return await c.post("/graphql", content=content, headers=headers or {})


async def test_a_declared_oversized_body_never_reaches_the_app():
    inner = RecordingApp()
    app = BodyLimitMiddleware(inner, max_body_bytes=1000)
    response = await _post(app, b"x" * 5000)
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/json"
    error = response.json()["errors"][0]
    assert error["extensions"] == {"code": PAYLOAD_TOO_LARGE, "maxBytes": 1000}
    assert inner.calls == 0


async def test_a_streamed_body_is_cut_off_before_the_app_sees_more_than_the_limit():
    inner = RecordingApp()
    app = BodyLimitMiddleware(inner, max_body_bytes=64 * 1024)
    sent: list[int] = []
    response = await _post(app, _chunks(100, 16 * 1024, sent))
    assert response.status_code == 413
    assert response.json()["errors"][0]["extensions"]["code"] == PAYLOAD_TOO_LARGE
    assert inner.bytes_seen <= 64 * 1024, "the crossing chunk is never handed to the app"


async def test_a_huge_declared_body_is_refused_without_reading_it():
    inner = RecordingApp()
    app = BodyLimitMiddleware(inner, max_body_bytes=1000, drain_bytes=10_000)
    read: list[int] = []
    headers = {"content-length": str(100 * 1000)}
    response = await _post(app, _chunks(100, 1000, read), headers)
    assert response.status_code == 413
    assert read == [], "beyond the drain budget not one byte is read"


async def test_bodies_within_the_limit_pass_untouched():
    inner = RecordingApp()
    app = BodyLimitMiddleware(inner, max_body_bytes=1000)
    response = await _post(app, _chunks(10, 100, []))
    assert response.status_code == 200
    assert inner.bytes_seen == 1000


async def test_the_graphql_app_answers_413_for_an_oversized_query():
    app = make_app(max_body_bytes=512)
    response = await _post(app, b'{"query": "{ hello }", "pad": "' + b"x" * 600 + b'"}')
    assert response.status_code == 413


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_real_client_uploading_too_much_reads_the_413_not_a_reset():
    port = _free_port()
    config = uvicorn.Config(
        make_app(max_body_bytes=64 * 1024), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
            json_type = {"content-type": "application/json"}
            declared = await c.post("/graphql", content=b"x" * (2 * 1024 * 1024))
            streamed = await c.post(
                "/graphql", content=_chunks(128, 16 * 1024, []), headers=json_type
            )
        assert declared.status_code == 413
        assert declared.json()["errors"][0]["extensions"]["code"] == PAYLOAD_TOO_LARGE
        assert streamed.status_code == 413
    finally:
        server.should_exit = True
        await task
