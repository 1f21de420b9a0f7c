"""The coalescing HTTP protocol (`stateward.http.http_protocol`), behind a real uvicorn on
a loopback port, spoken to with raw HTTP/1.1: every answer is byte-for-byte what uvicorn
sends (status, headers, body, chunking, keep-alive, pipelining, HEAD, errors) and a
one-body answer leaves in ONE write."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from stateward.commands.serve import uvicorn_options
from stateward.http.http_protocol import CoalescingHttpToolsProtocol
from stateward.settings import Settings

WRITES: list[bytes] = []


class CountingProtocol(CoalescingHttpToolsProtocol):
    """Records every write that reaches the socket's real transport."""

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        real_write = transport.write

        class Spy:
            def __getattr__(self, name: str) -> Any:
                return getattr(transport, name)

            def write(self, data: bytes) -> None:
                WRITES.append(bytes(data))
                real_write(data)

        super().connection_made(Spy())  # type: ignore[arg-type]


async def hello(request: Request) -> Response:
    return PlainTextResponse("hello " + request.query_params.get("n", ""))


async def echo(request: Request) -> Response:
    return Response(await request.body(), media_type="application/json")


async def stream(request: Request) -> Response:
    async def parts() -> AsyncIterator[bytes]:
        for part in (b"one,", b"two,", b"three"):
            yield part

    return StreamingResponse(parts(), media_type="text/plain")


async def empty(request: Request) -> Response:
    return Response(status_code=204)


async def boom(request: Request) -> Response:
    raise RuntimeError("boom")


APP = Starlette(
    routes=[
        Route("/hello", hello, methods=["GET", "HEAD"]),
        Route("/echo", echo, methods=["POST"]),
        Route("/stream", stream),
        Route("/empty", empty),
        Route("/boom", boom),
    ]
)


@pytest.fixture
async def port() -> AsyncIterator[int]:
    options = {**uvicorn_options(Settings()), "port": 0, "lifespan": "off"}
    options["http"] = CountingProtocol
    server = uvicorn.Server(uvicorn.Config(APP, **options))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    await task


async def exchange(port: int, raw: bytes, *, until: bytes, answers: int = 1) -> bytes:
    """Send `raw`, read until `until` has been seen `answers` times or the peer closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    got = b""
    while got.count(until) < answers:
        chunk = await asyncio.wait_for(reader.read(65536), 5)
        if not chunk:
            break
        got += chunk
    writer.close()
    return got


def test_serve_uses_the_coalescing_protocol() -> None:
    assert uvicorn_options(Settings())["http"] is CoalescingHttpToolsProtocol


async def test_one_write_per_answer_and_the_same_bytes(port: int) -> None:
    WRITES.clear()
    body = b'{"query":"{__typename}"}'
    raw = (
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    got = await exchange(port, raw, until=body)
    assert got.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"content-length: %d\r\n" % len(body) in got
    assert got.endswith(b"\r\n\r\n" + body)
    assert [got] == WRITES  # head and body in one write


async def test_keep_alive_and_pipelined_requests(port: int) -> None:
    WRITES.clear()
    one = b"GET /hello?n=1 HTTP/1.1\r\nHost: x\r\n\r\n"
    two = b"GET /hello?n=2 HTTP/1.1\r\nHost: x\r\n\r\n"
    got = await exchange(port, one + two, until=b"hello ", answers=2)
    assert got.count(b"HTTP/1.1 200 OK") == 2
    assert got.index(b"hello 1") < got.index(b"hello 2")
    assert len(WRITES) == 2 and b"".join(WRITES) == got


async def test_head_answers_its_head(port: int) -> None:
    got = await exchange(port, b"HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n", until=b"\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 200 OK\r\n")
    assert got.endswith(b"\r\n\r\n")
    assert b"hello" not in got


async def test_no_content_and_connection_close(port: int) -> None:
    got = await exchange(
        port, b"GET /empty HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", until=b"\0"
    )
    assert got.startswith(b"HTTP/1.1 204 No Content\r\n")
    assert got.endswith(b"\r\n\r\n")


async def test_streamed_answer_is_chunked_in_order(port: int) -> None:
    got = await exchange(port, b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n", until=b"0\r\n\r\n")
    assert b"transfer-encoding: chunked\r\n" in got
    assert got.endswith(b"4\r\none,\r\n4\r\ntwo,\r\n5\r\nthree\r\n0\r\n\r\n")


async def test_error_is_uvicorns_500(port: int) -> None:
    got = await exchange(port, b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n", until=b"Error")
    assert got.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert got.endswith(b"Internal Server Error")
