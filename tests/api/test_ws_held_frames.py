"""Frames held to the end of the loop's round (`http.ws_protocol.HeldFrames`), on real
loopback sockets: a socket's first frame of a round is written at once and the round's
others leave together in one write; nothing the protocol writes otherwise, nor a close,
overtakes a held frame; past `HOLD_BYTES` they are written at once; an abort drops them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from stateward.http.ws_protocol import HOLD_BYTES, HeldFrames


class Recorded:
    """A real transport whose writes are also recorded (the bytes still go out)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


@pytest.fixture
async def link() -> AsyncIterator[tuple[HeldFrames, Recorded, asyncio.StreamReader]]:
    """(held frames over a recorded client transport, the recording, the server's reader)."""
    accepted: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
    accepted = asyncio.get_running_loop().create_future()

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result((reader, writer))

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    peer, peer_writer = await accepted
    recorded = Recorded(writer.transport)  # type: ignore[arg-type]
    held = HeldFrames(recorded, asyncio.get_running_loop())  # type: ignore[arg-type]
    try:
        yield held, recorded, peer
    finally:
        writer.transport.abort()
        peer_writer.close()
        server.close()
        await server.wait_closed()


async def _round_ends() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_rounds_first_frame_goes_at_once_the_others_together(link: Any) -> None:
    held, recorded, peer = link
    held.hold(b"a1")
    held.hold(b"b22")
    held.hold(b"c333")
    assert recorded.writes == [b"a1"]  # the round's first: no wait
    await _round_ends()
    assert recorded.writes == [b"a1", b"b22c333"]  # the others: one write
    held.hold(b"d4")  # a new round: its first goes at once again
    assert recorded.writes[-1] == b"d4"
    assert await peer.readexactly(11) == b"a1b22c333d4"


async def test_nothing_overtakes_a_held_frame(link: Any) -> None:
    held, recorded, peer = link
    for frame in (b"1", b"2", b"3"):
        held.hold(frame)
    held.write(b"ping")  # the protocol's own write, in the same round
    assert recorded.writes == [b"1", b"23", b"ping"]
    held.hold(b"4")
    held.close()  # a close sends what is held first
    assert recorded.writes[-1] == b"4"
    assert await peer.read() == b"123ping4"  # everything, in order, then EOF


async def test_past_hold_bytes_the_frames_are_written_at_once(link: Any) -> None:
    held, recorded, peer = link
    big = b"x" * (HOLD_BYTES // 2)
    held.hold(b"first")
    held.hold(big)
    assert recorded.writes == [b"first"]
    held.hold(big)  # HOLD_BYTES held: written now, not at the round's end
    assert recorded.writes == [b"first", big + big]
    await _round_ends()
    assert len(recorded.writes) == 2
    assert await peer.readexactly(5 + 2 * len(big)) == b"first" + big + big


async def test_an_abort_drops_what_is_held_and_a_closing_socket_writes_nothing(
    link: Any,
) -> None:
    held, recorded, _ = link
    held.hold(b"sent")
    held.hold(b"dropped")
    assert not held.is_closing()
    held.abort()
    assert held.is_closing()  # the transport's own answer
    await _round_ends()
    assert recorded.writes == [b"sent"]
    held.hold(b"late")  # a new round on a closed transport
    held.hold(b"later")
    await _round_ends()
    assert b"later" not in recorded.writes
