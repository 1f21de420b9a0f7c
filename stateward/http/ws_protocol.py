"""uvicorn's websockets-sansio protocol, offering the app a synchronous frame writer.

The fan-out sends one event to hundreds of sockets. Through ASGI each `next` frame cost a
chain of coroutines per socket (Starlette's `WebSocket.send`, every middleware's `send`
wrapper, uvicorn's `send` and the websockets state machine's framing) on top of the one
`transport.write` it needs. This protocol puts a writer in the websocket scope's
`extensions` under `FRAME_WRITER` (an ASGI extension: an app or server without it keeps
the ordinary path): `writer(frame)` writes an already framed, unmasked, uncompressed text
frame (`text_frame`) straight to the transport and answers True, or answers False —
writing nothing — when it can't right now (handshake not done, closing or closed, the
transport's buffer above its high-water mark, or an extension such as permessage-deflate
negotiated, which would have to transform the frame). The caller then falls back to the
ordinary awaited `send`, which waits for the buffer to drain (backpressure stays).

A socket that gets several frames in one round of the event loop gets them in one write
(`HeldFrames`): a group-commit batch's events fan out one after the other in one round,
and each socket used to get one `write` per event — one system call and one TCP segment
each, for the server and for the subscriber that reads them. The round's first frame
for a socket is written at once (a lone event's latency is what it was); later ones are
held until the round ends (one `call_soon` per round for all sockets, `_Round`) and
leave in one write. Every other write of the socket (the protocol's pings, pongs and
close frames, the ordinary `send`) first sends what is held, so nothing overtakes a
held frame; past `HOLD_BYTES` held they are written at once (the transport's buffer,
and with it the backpressure above, stays the judge).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

#: The scope extension's key; its value is a `FrameWriter`.
FRAME_WRITER = "stateward.websocket.frame_writer"
#: Writes one ready frame now (True) or declines without writing (False).
FrameWriter = Callable[[bytes], bool]

_OPEN = State.OPEN
#: Bytes of frames held for one socket before they are written at once.
HOLD_BYTES = 64 * 1024


def text_frame(payload: bytes) -> bytes:
    """`payload` (UTF-8 text) as one final, unmasked text frame (RFC 6455 §5.2), as a
    server sends it without extensions."""
    size = len(payload)
    if size < 126:
        return bytes((0x81, size)) + payload
    if size < 65536:
        return bytes((0x81, 126)) + size.to_bytes(2, "big") + payload
    return bytes((0x81, 127)) + size.to_bytes(8, "big") + payload


class _Round:
    """The sockets that were written to in this round of one event loop: at its end (one
    `call_soon`), each writes what it held and starts the next round afresh."""

    __slots__ = ("loop", "sockets")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.sockets: list[HeldFrames] = []

    def touched(self, socket: HeldFrames) -> None:
        if not self.sockets:
            self.loop.call_soon(self.end)
        self.sockets.append(socket)

    def end(self) -> None:
        sockets, self.sockets = self.sockets, []
        for socket in sockets:
            socket.end_round()


_ROUNDS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Round] = weakref.WeakKeyDictionary()


def _round_of(loop: asyncio.AbstractEventLoop) -> _Round:
    found = _ROUNDS.get(loop)
    if found is None:
        found = _ROUNDS[loop] = _Round(loop)
    return found


class HeldFrames:
    """A socket's transport that writes the round's first `hold`-en frame at once and
    holds the others until the round ends, then writes them in one go; every other write
    or close sends them first (see the module). Anything else is the transport's own."""

    __slots__ = ("_held", "_round", "_size", "_touched", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._round = _round_of(loop)
        self._held: list[bytes] | None = None
        self._size = 0
        self._touched = False

    def hold(self, frame: bytes) -> None:
        """Write `frame` now when it is this round's first for the socket, else with the
        round's others at its end (or now, with them, past `HOLD_BYTES`)."""
        held = self._held
        if held is None:
            if not self._touched:
                self._touched = True
                self._round.touched(self)
                self._transport.write(frame)
                return
            self._held = [frame]
            self._size = len(frame)
            return
        held.append(frame)
        self._size += len(frame)
        if self._size >= HOLD_BYTES:
            self.flush()

    def end_round(self) -> None:
        """The round is over: write what is held; the next frame is a round's first."""
        self._touched = False
        self.flush()

    def flush(self) -> None:
        """Write what is held (nothing when the socket is closing)."""
        held, self._held = self._held, None
        if held and not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def is_closing(self) -> bool:
        # defined here, not found through `__getattr__`: asked at every frame written
        return self._transport.is_closing()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.flush()
        self._transport.write(data)

    def writelines(self, lines: Iterable[bytes | bytearray | memoryview]) -> None:
        self.flush()
        self._transport.writelines(lines)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class FrameWriterProtocol(WebSocketsSansIOProtocol):
    """`WebSocketsSansIOProtocol` whose scope carries a `FrameWriter` (see the module)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """uvicorn's, then the transport wrapped so that frames can be held (`HeldFrames`)."""
        super().connection_made(transport)
        self.transport = HeldFrames(self.transport, self.loop)  # type: ignore[assignment]

    async def run_asgi(self) -> None:
        """Offer the frame writer to the app, then run it as uvicorn does."""
        scope: Any = self.scope
        scope["extensions"][FRAME_WRITER] = self.write_frame
        await super().run_asgi()

    def write_frame(self, frame: bytes) -> bool:
        """Write a ready text frame if the socket is open, writable and plain: now when it
        is the socket's first of this round of the loop, else with the round's others at
        its end (`HeldFrames`)."""
        if (
            self.close_sent
            or self.disconnected
            or not self.writable.is_set()
            or self.conn.state is not _OPEN
            or self.conn.extensions
            or self.initial_response is not None
        ):
            return False
        transport: Any = self.transport
        if transport.is_closing():
            return False
        transport.hold(frame)
        return True
