"""`bench/_common.py`: the lean load generator's HTTP parsing and the CPU accounting."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import pytest
from _common import Connection, cpu_seconds, env_pairs, hammer, median_range


def test_cpu_seconds_reads_this_process() -> None:
    before = cpu_seconds(os.getpid())
    sum(i * i for i in range(200_000))
    assert cpu_seconds(os.getpid()) >= before > 0


def test_median_range() -> None:
    assert median_range([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)


def test_env_pairs_are_name_equals_value_and_nothing_else() -> None:
    assert env_pairs(["STATEWARD_SERVER_CPUS=1", "A=b=c", "EMPTY="]) == {
        "STATEWARD_SERVER_CPUS": "1",
        "A": "b=c",
        "EMPTY": "",
    }
    for bad in ("NOEQUALS", "=value"):
        with pytest.raises(ValueError, match="not NAME=VALUE"):
            env_pairs([bad])


async def _server(chunked: bool) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            body = await reader.readexactly(length)
            if chunked:
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")  # fmt: skip
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_a_keep_alive_connection_reads_sized_and_chunked_answers() -> None:
    for chunked in (False, True):
        server, port = await _server(chunked)
        conn = Connection(f"http://127.0.0.1:{port}/graphql")
        try:
            assert await conn.post(b'{"a":1}') == (200, b'{"a":1}')
            assert await conn.post(b'{"b":22}') == (200, b'{"b":22}')  # the same connection
        finally:
            conn.close()
            server.close()


async def test_hammer_counts_requests_and_stops_when_bodies_run_out() -> None:
    server, port = await _server(False)
    try:
        bodies = iter([b"{}"] * 7)
        count, latencies = await hammer(
            f"http://127.0.0.1:{port}/", 2, 30, lambda i, n: next(bodies, None)
        )
    finally:
        server.close()
    assert count == 7 and len(latencies) == 7
