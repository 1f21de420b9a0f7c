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

Frames are whole `transport.write`s, so they never interleave with the protocol's own
pings, pongs and close frames.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

#: The scope extension's key; its value is a `FrameWriter`.
FRAME_WRITER = "stateward.websocket.frame_writer"
#: Writes one ready frame now (True) or declines without writing (False).
FrameWriter = Callable[[bytes], bool]

_OPEN = State.OPEN


def text_frame(payload: bytes) -> bytes:
    """`payload` (UTF-8 text) as one final, unmasked text frame (RFC 6455 §5.2), as a
    server sends it without extensions."""
    size = len(payload)
    if size < 126:
        return bytes((0x81, size)) + payload
    if size < 65536:
        return bytes((0x81, 126)) + size.to_bytes(2, "big") + payload
    return bytes((0x81, 127)) + size.to_bytes(8, "big") + payload


class FrameWriterProtocol(WebSocketsSansIOProtocol):
    """`WebSocketsSansIOProtocol` whose scope carries a `FrameWriter` (see the module)."""

    async def run_asgi(self) -> None:
        """Offer the frame writer to the app, then run it as uvicorn does."""
        scope: Any = self.scope
        scope["extensions"][FRAME_WRITER] = self.write_frame
        await super().run_asgi()

    def write_frame(self, frame: bytes) -> bool:
        """Write a ready text frame now if the socket is open, writable and plain."""
        if (
            self.close_sent
            or self.disconnected
            or not self.writable.is_set()
            or self.conn.state is not _OPEN
            or self.conn.extensions
            or self.initial_response is not None
        ):
            return False
        transport = self.transport
        if transport.is_closing():
            return False
        transport.write(frame)
        return True
