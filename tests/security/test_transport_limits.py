"""Attack family: transport limits. Oversized websocket frames, cross-origin browsers and
CSRF-shaped requests against a real `stateward serve` process or the real app
(issue 9 items 5 and 12).

Before: uvicorn's `ws_max_size` stayed at 16 MiB, so a 15 MiB frame sent before
`connection_init` was buffered in full before the app's own limit closed the socket
(eight such sockets raised the server's memory by ~100 MB).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import websockets
from graph_stack import Api, open_stack
from harness import ServerProcess

from stateward.commands.serve import uvicorn_options
from stateward.settings import Settings

FRAME = 15 * 1024 * 1024


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set size (VmHWM) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


async def send_big_frame(url: str) -> int | None:
    """Send one 15 MiB text frame before `connection_init`; the close code received."""
    try:
        async with websockets.connect(
            url, subprotocols=["graphql-transport-ws"], max_size=None, write_limit=2**26
        ) as ws:
            with contextlib.suppress(websockets.ConnectionClosed):
                await ws.send("x" * FRAME)
            try:
                await asyncio.wait_for(ws.recv(), 30)
            except websockets.ConnectionClosed as closed:
                return closed.rcvd.code if closed.rcvd else None
    except websockets.ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None
    return None


def test_serve_gives_uvicorn_the_body_limit_and_no_proxy_handling():
    options = uvicorn_options(Settings(max_body_bytes=4096))
    assert options["ws_max_size"] == 4096
    assert options["proxy_headers"] is False


def test_permessage_deflate_is_off_unless_asked_for():
    assert uvicorn_options(Settings())["ws_per_message_deflate"] is False
    on = Settings.from_env({"STATEWARD_WS_DEFLATE": "1"})
    assert uvicorn_options(on)["ws_per_message_deflate"] is True


@pytest.mark.slow
async def test_a_huge_pre_init_frame_is_refused_before_it_is_buffered(
    server: ServerProcess,
):
    assert server.proc is not None
    before = peak_rss_kib(server.proc.pid)
    closes = await asyncio.gather(*(send_big_frame(server.ws_url) for _ in range(8)))
    assert set(closes) == {1009}, closes
    grown_mib = (peak_rss_kib(server.proc.pid) - before) / 1024
    assert grown_mib < 40, f"peak RSS grew by {grown_mib:.0f} MiB for 8 refused frames"
    async with httpx.AsyncClient() as client:  # and the server is still fine
        response = await client.post(server.url, json={"query": "{ net }"})
    assert response.json()["data"]["net"]


@pytest.fixture
async def cors_api(sqlite_db_url: str) -> AsyncIterator[Api]:
    stack, close = await open_stack(sqlite_db_url, allowed_origins=("https://app.example",))
    try:
        yield stack
    finally:
        await close()


async def test_an_allowed_origin_gets_cors_headers(cors_api: Api):
    headers = {"origin": "https://app.example", "access-control-request-method": "POST",
               "access-control-request-headers": "authorization, content-type"}  # fmt: skip
    preflight = await cors_api.client.options("/graphql", headers=headers)
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    assert "access-control-allow-credentials" not in preflight.headers
    response = await cors_api.client.post(
        "/graphql", json={"query": "{ net }"}, headers={"origin": "https://app.example"}
    )
    assert response.headers["access-control-allow-origin"] == "https://app.example"


async def test_another_origin_gets_no_cors_headers(cors_api: Api):
    headers = {"origin": "https://evil.example", "access-control-request-method": "POST"}
    preflight = await cors_api.client.options("/graphql", headers=headers)
    assert preflight.status_code == 400
    assert "access-control-allow-origin" not in preflight.headers
    response = await cors_api.client.post(
        "/graphql", json={"query": "{ net }"}, headers={"origin": "https://evil.example"}
    )
    assert "access-control-allow-origin" not in response.headers


async def test_by_default_only_the_same_origin_may_read(api: Api):
    headers = {"origin": "https://app.example", "access-control-request-method": "POST"}
    preflight = await api.client.options("/graphql", headers=headers)
    assert "access-control-allow-origin" not in preflight.headers


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
async def test_csrf_shaped_posts_are_still_refused(cors_api: Api, content_type: str):
    # A cross-site <form> or fetch without preflight can only send these content types.
    response = await cors_api.client.post(
        "/graphql",
        content='{"query": "mutation { authChallenge(publicKey: \\"x\\") { challenge } }"}',
        headers={"content-type": content_type, "origin": "https://evil.example"},
    )
    assert response.status_code == 400
    assert "access-control-allow-origin" not in response.headers
