"""SIGTERM: stop accepting, finish the requests in flight, close websockets with 1001,
exit 0 within `STATEWARD_SHUTDOWN_GRACE`."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest
import websockets
from harness import ServerProcess, login

from stateward.governance.keys import read_key_file

pytestmark = pytest.mark.slow
GRACE = 6


async def _half_sent_request(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    """A POST whose headers and first half of the body are sent: a request in flight."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    body = json.dumps({"query": "{ __typename }"}).encode()
    head = (
        f"POST /graphql HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    writer.write(head + body[: len(body) // 2])
    await writer.drain()
    return reader, writer, body[len(body) // 2 :]


async def test_sigterm_drains_requests_closes_sockets_1001_and_exits(tmp_path: Path) -> None:
    env = {
        "STATEWARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}",
        "STATEWARD_OPERATOR_KEY_FILE": str(tmp_path / "operator.json"),
        "STATEWARD_SHUTDOWN_GRACE": str(GRACE),
    }
    server = ServerProcess(env=env, cwd=tmp_path).start()
    try:
        token = await login(server.url, read_key_file(tmp_path / "operator.json"))
        ws = await websockets.connect(
            server.ws_url, subprotocols=[websockets.Subprotocol("graphql-transport-ws")]
        )
        await ws.send(json.dumps({"type": "connection_init",
                                  "payload": {"authorization": f"Bearer {token}"}}))  # fmt: skip
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        query = "subscription { events { cursor type } }"
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
        reader, writer, rest = await _half_sent_request(server.url)
        await asyncio.sleep(0.3)

        assert server.proc is not None
        stopped_at = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001

        writer.write(rest)  # the request in flight is still answered
        await writer.drain()
        response = await asyncio.wait_for(reader.read(), 5)
        assert response.startswith(b"HTTP/1.1 200"), response[:200]
        assert b'"__typename":"Query"' in response.replace(b" ", b"")
        writer.close()

        host, port = server.url.split("//", 1)[1].split("/", 1)[0].split(":")
        with pytest.raises(OSError):  # no new connections
            await asyncio.open_connection(host, int(port))

        code = await asyncio.to_thread(server.proc.wait, GRACE + 2)
        took = time.monotonic() - stopped_at
        assert code == 0, server.output()[-2000:]
        assert took <= GRACE, took
    finally:
        server.stop()
