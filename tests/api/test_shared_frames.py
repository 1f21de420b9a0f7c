"""Fan-out that executes once: subscribers of one event with the same document share one
execution, and a subscriber never receives an event of a namespace it may not read; a
burst of events committed together reaches every subscriber whole and in bus order (the
fan-out loop then holds a socket's frames to the end of the round) — whether frames are
written from the fan-out loop (`http.ws_protocol`, as `stateward serve` runs) or by
each subscriber's task (a server without the frame writer)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from graph_stack import Api
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from tenant_world import ACT, Socket, serve, subscribed, world

from stateward.http.ws_protocol import FrameWriterProtocol, HeldFrames
from stateward.schema import base

QUERY = 'subscription{events(filter:{types:["workflow.updated"]}){type namespace instanceId}}'


#: (frame writer offered, permessage-deflate offered): frames are written from the fan-out
#: loop only in the first case (deflate would have to transform each frame).
SERVERS = {"frame-writer": (True, False), "asgi-send": (False, False), "deflate": (True, True)}


@pytest.fixture(params=list(SERVERS))
async def ws_url(api: Api, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    frame_writer, deflate = SERVERS[request.param]
    async for url in serve(api, frame_writer=frame_writer, deflate=deflate):
        yield url


async def _frames(sock: Socket, count: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(count):
        message = await sock.message()
        assert message["type"] == "next", message
        out.append(message["payload"])
    return out


async def test_a_restricted_subscriber_never_receives_another_class_frame(
    api: Api, ws_url: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    w = await world(api)
    runs = 0
    original = StrawberryGraphQLCoreExecutionContext.execute_operation

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal runs
        if self.root_value is not None:  # a subscription event
            runs += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(StrawberryGraphQLCoreExecutionContext, "execute_operation", counted)
    encoded = 0
    dumps = base._dumps

    def counted_dumps(value: Any) -> str:
        nonlocal encoded
        encoded += isinstance(value, dict)
        return dumps(value)

    monkeypatch.setattr(base, "_dumps", counted_dumps)
    written: list[bytes] = []
    write_frame = FrameWriterProtocol.write_frame

    def counted_write(self: FrameWriterProtocol, frame: bytes) -> bool:
        done = write_frame(self, frame)
        if done:
            written.append(frame)
        return done

    monkeypatch.setattr(FrameWriterProtocol, "write_frame", counted_write)
    socks = {
        name: await Socket.open(ws_url, token)
        for name, token in (
            ("acme", w.acme.analyst[1]),
            ("globex", w.globex.analyst[1]),
            ("admin1", api.admin_token),
            ("admin2", api.admin_token),
        )
    }
    try:
        for sock in socks.values():
            await sock.subscribe(QUERY, {})
        await subscribed(api, 4)
        await asyncio.sleep(0.2)
        runs = encoded = 0
        for tenant in (w.acme, w.globex, w.acme):
            await api.ok(ACT, {"i": tenant.instance, "a": "note", "in": {"text": "t"}},
                         token=tenant.admin[1])  # fmt: skip
        acme = await _frames(socks["acme"], 2)
        globex = await _frames(socks["globex"], 1)
        admin1 = await _frames(socks["admin1"], 3)
        admin2 = await _frames(socks["admin2"], 3)
        assert await socks["acme"].silent(0.5) and await socks["globex"].silent(0.1)
    finally:
        for sock in socks.values():
            await sock.close()
    assert {f["data"]["events"]["namespace"] for f in acme} == {"acme/sales"}
    assert {f["data"]["events"]["namespace"] for f in globex} == {"globex/sales"}
    assert admin1 == admin2  # the same frames, in the same order
    assert [f for f in admin1 if f["data"]["events"]["namespace"] == "acme/sales"] == acme
    assert runs == 3  # one execution per event, shared by every subscriber allowed to see it
    assert encoded == 3  # and one serialisation of its payload (`LiveOperation`)
    if request.node.callspec.params["ws_url"] == "frame-writer":  # from the fan-out loop
        assert written and all(f.startswith(b"\x81") for f in written)
    else:
        assert written == []


async def test_different_documents_are_executed_apart(api: Api, ws_url: str) -> None:
    w = await world(api)
    one, two = (
        await Socket.open(ws_url, api.admin_token),
        await Socket.open(ws_url, api.admin_token),
    )
    try:
        await one.subscribe(QUERY, {})
        await two.subscribe('subscription{events(filter:{types:["workflow.updated"]}){cursor}}', {})
        await subscribed(api, 2)
        await asyncio.sleep(0.2)
        await api.ok(ACT, {"i": w.acme.instance, "a": "note", "in": {"text": "t"}},
                     token=w.acme.admin[1])  # fmt: skip
        [first] = await _frames(one, 1)
        [second] = await _frames(two, 1)
    finally:
        await one.close()
        await two.close()
    assert set(first["data"]["events"]) == {"type", "namespace", "instanceId"}
    assert set(second["data"]["events"]) == {"cursor"}


async def test_a_burst_reaches_every_subscriber_whole_and_in_bus_order(
    api: Api, ws_url: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    w = await world(api)
    together: list[int] = []  # frames per write of held frames (`HeldFrames.flush`)
    flush = HeldFrames.flush

    def counted_flush(self: HeldFrames) -> None:
        together.append(len(self._held or ()))
        flush(self)

    monkeypatch.setattr(HeldFrames, "flush", counted_flush)
    query = 'subscription{events(filter:{types:["workflow.updated"]}){cursor instanceId}}'
    socks = [await Socket.open(ws_url, api.admin_token) for _ in range(3)]
    try:
        for sock in socks:
            await sock.subscribe(query, {})
        await subscribed(api, 3)
        await asyncio.sleep(0.2)
        await asyncio.gather(*(
            api.ok(ACT, {"i": t.instance, "a": "note", "in": {"text": f"t{n}"}}, token=t.admin[1])
            for n in range(8) for t in (w.acme, w.globex)
        ))  # fmt: skip
        got = [await _frames(sock, 16) for sock in socks]
        assert await socks[0].silent(0.3)
    finally:
        for sock in socks:
            await sock.close()
    cursors = [int(f["data"]["events"]["cursor"]) for f in got[0]]
    assert cursors == sorted(set(cursors)) and len(cursors) == 16  # bus order, none twice
    assert got[0] == got[1] == got[2]
    ids = [f["data"]["events"]["instanceId"] for f in got[0]]
    assert sorted(ids.count(i) for i in set(ids)) == [8, 8]  # both instances, every event
    if request.node.callspec.params["ws_url"] != "frame-writer":
        assert not any(together)  # frames not written from the fan-out loop are never held
