"""uvicorn's httptools protocol, writing a response's head and first body chunk together.

uvicorn writes the status line and headers (`http.response.start`) with one
`transport.write` and the body (`http.response.body`) with another: two `send` system
calls and two TCP segments per answer, and on the loopback each segment also runs the
receiving side's network stack on the sender's CPU. Every GraphQL answer is a head and
one body, so half of those writes were avoidable (issue 18: the socket write was 3–6 % of
a `performAction`'s server CPU).

`CoalescingHttpToolsProtocol` gives each request/response cycle a transport that HOLDS
the head instead of writing it, and writes it in front of the first body write — or
when the cycle closes the connection, or once the response is complete without any body
write (HEAD, 204, 304) — so nothing is ever left unsent. The bytes on the wire, their order
and every uvicorn check (content length, chunked encoding, keep-alive, flow control,
pipelining) are uvicorn's own: only the number of writes changes. A `100 Continue`
interim answer is written before the response starts, through the real transport.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle


class _HeldHead:
    """The cycle's transport while its response head waits for the first body write
    (every other attribute is the real transport's)."""

    __slots__ = ("_head", "_transport")

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._head: bytes | None = None

    def write(self, data: bytes) -> None:
        """Hold the first write (the head); later writes go out behind it."""
        if self._head is None:
            self._head = bytes(data)
            return
        head, self._head = self._head, b""
        self._transport.write(head + data if head else data)

    def release(self) -> None:
        """Write a head still held (a response that ended without a body write)."""
        head, self._head = self._head, b""
        if head:
            self._transport.write(head)

    def close(self) -> None:
        """Send what is held, then close (as the real transport would have)."""
        self.release()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingCycle(RequestResponseCycle):
    """uvicorn's request/response cycle with the head held for the first body write."""

    async def send(self, message: Any) -> None:
        """uvicorn's `send`; the head's write is held (see the module docstring)."""
        if not self.response_started and message["type"] == "http.response.start":
            real = self.transport
            held = _HeldHead(real)
            self.transport = held  # type: ignore[assignment]
            try:
                await super().send(message)
            except BaseException:
                self.transport = real
                raise
            if not self.response_started:  # disconnected meanwhile: nothing was written
                self.transport = real
            return
        await super().send(message)
        transport: Any = self.transport
        if self.response_complete and isinstance(transport, _HeldHead):
            transport.release()
            self.transport = transport._transport


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` whose cycles are `CoalescingCycle`s (see the module)."""

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        cycle.__class__ = CoalescingCycle
        super()._start_asgi_task(cycle, app)
