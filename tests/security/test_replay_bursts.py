"""Attack family: replay bursts (issue 9 item 10). `events(after: "0")` streams the
backlog from the database in bounded pages, letting each row go once it is sent, so a
burst of replays holds at most page size x subscribers rows.

Before: pages of 500 rows; 500 concurrent `after: "0"` replays raised the server's RSS by
~800 MB, and it never came back.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import websockets
from graph_stack import Api
from sqlalchemy import event

from stateward.resolvers.streams import REPLAY_PAGE

BACKLOG = 230
EVENTS = 'subscription{events(after:"0",filter:{namespace:"replay/burst"}){cursor}}'


async def fill_backlog(api: Api, count: int) -> None:
    """`count` bus messages of ~4 KB each in the outbox (as committed events leave them)."""
    now = datetime.now(UTC)
    async with api.runtime.uow() as uow:
        for i in range(count):
            payload = {"namespace": "replay/burst", "workflow": "replay/burst/w",
                       "instanceId": f"i{i}", "data": {"blob": "x" * 4096}}  # fmt: skip
            uow.outbox.stage("workflow.started", payload, now, namespace="replay/burst")
        await uow.commit()


async def replay(api: Api, ws_url: str) -> list[int]:
    """Cursors one `after: "0"` subscriber receives until the backlog is through."""
    cursors: list[int] = []
    async with websockets.connect(ws_url, subprotocols=["graphql-transport-ws"]) as ws:
        init = {"authorization": f"Bearer {api.admin_token}"}
        await ws.send(json.dumps({"type": "connection_init", "payload": init}))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": EVENTS}}))
        while len(cursors) < BACKLOG:
            message = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert message["type"] == "next", message
            cursors.append(int(message["payload"]["data"]["events"]["cursor"]))
    return cursors


async def test_concurrent_replays_read_the_outbox_in_bounded_pages(api: Api, ws_url: str):
    await fill_backlog(api, BACKLOG)
    limits: list[int] = []  # the LIMIT of every replay read of the outbox

    def record_limit(conn: Any, cursor: Any, statement: str, params: Any, *rest: Any) -> None:
        if "FROM outbox" in statement and "outbox.namespace = " in statement:
            values = list(params.values() if isinstance(params, dict) else params)
            limits.append(int(values[-1]))  # LIMIT is the statement's last parameter

    target = api.runtime.engine.sync_engine
    event.listen(target, "before_cursor_execute", record_limit)
    try:
        results = await asyncio.gather(*(replay(api, ws_url) for _ in range(10)))
    finally:
        event.remove(target, "before_cursor_execute", record_limit)
    for cursors in results:  # every subscriber got the whole backlog, in order, once
        assert len(cursors) == BACKLOG
        assert cursors == sorted(set(cursors))
    assert REPLAY_PAGE <= 64
    assert limits, "no outbox reads seen"
    assert max(limits) <= REPLAY_PAGE, limits  # never more than one page per read
    assert len(limits) >= 10 * (BACKLOG // REPLAY_PAGE)  # the backlog came page by page
