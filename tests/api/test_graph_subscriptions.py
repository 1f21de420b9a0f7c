"""Subscriptions over a real websocket (uvicorn + graphql-transport-ws)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
import websockets
from graph_stack import Api, loan

START = 'mutation{startInstance(workflow:"acme/loans/loan"){id instanceId}}'
SUBMIT = """mutation($i:ID!){performAction(instance:$i,action:"submit",
  input:{fields:{amount:5}}){event{seq}}}"""
FLOW = {"workflow": "acme/loans/loan", "types": ["workflow.started", "workflow.advanced"]}
EVENTS = """subscription($f:EventFilter,$a:String){events(filter:$f,after:$a){
  id cursor type eventType namespace workflow instanceId actor action fromState toState}}"""


@pytest.fixture
async def ws_url(api: Api) -> AsyncIterator[str]:
    """The app served by a real uvicorn on a free port, in this test's event loop."""
    config = uvicorn.Config(api.app, host="127.0.0.1", port=0, lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"ws://127.0.0.1:{port}/graphql"
    server.should_exit = True
    await task


class Socket:
    """A graphql-transport-ws client: init, subscribe, read `next` payloads."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, url: str, token: str) -> Socket:
        conn = await websockets.connect(url, subprotocols=["graphql-transport-ws"])
        await conn.send(json.dumps({"type": "connection_init",
                                    "payload": {"Authorization": f"Bearer {token}"}}))  # fmt: skip
        ack = json.loads(await conn.recv())
        assert ack["type"] == "connection_ack", ack
        return cls(conn)

    async def subscribe(self, query: str, variables: dict[str, Any], op: str = "1") -> None:
        payload = {"query": query, "variables": variables}
        await self.conn.send(json.dumps({"id": op, "type": "subscribe", "payload": payload}))

    async def next(self, timeout: float = 5.0) -> dict[str, Any]:
        message = json.loads(await asyncio.wait_for(self.conn.recv(), timeout))
        assert message["type"] == "next", message
        assert not message["payload"].get("errors"), message
        return message["payload"]["data"]  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self.conn.close()


async def _subscribed(api: Api, count: int) -> None:
    for _ in range(500):
        if len(api.services.bus.fanout) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("subscription never reached the bus")


async def test_a_subscriber_receives_workflow_advanced(api: Api, ws_url: str) -> None:
    await api.ok("mutation($d:JSON!){addWorkflow(definition:$d){id}}", {"d": loan()})
    inst = (await api.ok(START))["startInstance"]
    sock = await Socket.open(ws_url, api.admin_token)
    try:
        await sock.subscribe(EVENTS, {"f": {"types": ["workflow.advanced"]}})
        await _subscribed(api, 1)
        await api.ok(SUBMIT, {"i": inst["id"]})
        event = (await sock.next())["events"]
        assert event["type"] == "workflow.advanced"
        assert (event["fromState"], event["toState"]) == ("intake", "review")
        assert event["instanceId"] == inst["instanceId"] and event["action"] == "submit"
        assert event["actor"] == api.admin.public and event["namespace"] == "acme/loans"
    finally:
        await sock.close()


async def test_resuming_after_a_cursor_replays_then_goes_live_without_duplicates(
    api: Api, ws_url: str
) -> None:
    await api.ok("mutation($d:JSON!){addWorkflow(definition:$d){id}}", {"d": loan()})
    first = (await api.ok(START))["startInstance"]
    second = (await api.ok(START))["startInstance"]
    await api.ok(SUBMIT, {"i": first["id"]})
    await api.ok(SUBMIT, {"i": second["id"]})
    sock = await Socket.open(ws_url, api.admin_token)
    try:
        await sock.subscribe(EVENTS, {"f": FLOW, "a": "0"})
        backlog = [(await sock.next())["events"] for _ in range(4)]
        assert [e["type"] for e in backlog] == [
            "workflow.started",
            "workflow.started",
            "workflow.advanced",
            "workflow.advanced",
        ]
        assert [e["eventType"] for e in backlog[1:3]] == ["WORKFLOW_STARTED", "WORKFLOW_ADVANCED"]
        cursor = backlog[1]["cursor"]
        third = (await api.ok(START))["startInstance"]
        live = (await sock.next())["events"]
        assert live["type"] == "workflow.started" and live["instanceId"] == third["instanceId"]
        cursors = [e["cursor"] for e in [*backlog, live]]
        assert all(isinstance(c, str) and c.isdigit() for c in cursors)
        assert [int(c) for c in cursors] == sorted({int(c) for c in cursors})
    finally:
        await sock.close()
    resumed = await Socket.open(ws_url, api.admin_token)
    try:
        await resumed.subscribe(EVENTS, {"f": FLOW, "a": cursor})  # as received
        again = [(await resumed.next())["events"]["cursor"] for _ in range(3)]
        assert again == cursors[2:]
    finally:
        await resumed.close()


async def test_a_subscriber_sees_only_namespaces_it_may_read(api: Api, ws_url: str) -> None:
    await api.ok("mutation($d:JSON!){addWorkflow(definition:$d){id}}", {"d": loan()})
    await api.ok("mutation($d:JSON!){addWorkflow(definition:$d){id}}",
                 {"d": loan("globex/loans/loan")})  # fmt: skip
    _, globex = await api.user("globex", "analyst")
    sock = await Socket.open(ws_url, globex)
    try:
        await sock.subscribe(EVENTS, {"f": {"types": ["workflow.started"]}})
        await _subscribed(api, 1)
        await api.ok(START)
        mine = await api.ok('mutation{startInstance(workflow:"globex/loans/loan"){instanceId}}')
        event = (await sock.next())["events"]
        assert event["namespace"] == "globex/loans"
        assert event["instanceId"] == mine["startInstance"]["instanceId"]
    finally:
        await sock.close()


async def test_instance_updated_yields_the_instance_after_each_event(api: Api, ws_url: str) -> None:
    await api.ok("mutation($d:JSON!){addWorkflow(definition:$d){id}}", {"d": loan()})
    inst = (await api.ok(START))["startInstance"]
    sock = await Socket.open(ws_url, api.admin_token)
    try:
        await sock.subscribe(
            "subscription($i:ID!){instanceUpdated(id:$i){seq state{key} lastEvents(count:1)"
            "{action}}}",
            {"i": inst["id"]},
        )
        await _subscribed(api, 1)
        await api.ok(SUBMIT, {"i": inst["id"]})
        got = (await sock.next())["instanceUpdated"]
        assert got == {"seq": 2, "state": {"key": "review"}, "lastEvents": [{"action": "submit"}]}
        # The submit published several bus messages (advanced, assigned): one snapshot.
        with pytest.raises(TimeoutError):
            await sock.next(timeout=1.0)
    finally:
        await sock.close()


async def test_a_team_member_watches_its_assignment_queue(api: Api, ws_url: str) -> None:
    await api.ok("mutation($d:JSON!){addWorkflow(definition:$d){id}}", {"d": loan()})
    inst = (await api.ok(START))["startInstance"]
    _, analyst = await api.user("acme", "analyst")
    sock = await Socket.open(ws_url, analyst)
    try:
        await sock.subscribe(
            'subscription{assignmentQueue(team:"analyst"){type team assignmentId instanceId}}', {}
        )
        await _subscribed(api, 1)
        await api.ok(SUBMIT, {"i": inst["id"]})
        event = (await sock.next())["assignmentQueue"]
        assert event["type"] == "workflow.assigned" and event["team"] == "analyst"
        assert event["instanceId"] == inst["instanceId"] and event["assignmentId"]
    finally:
        await sock.close()


async def test_the_assignment_queue_sends_each_change_once(api: Api, ws_url: str) -> None:
    """Issue 16 (live lists): one message per change, in order, none repeated: opened,
    claimed, then completed - never the opening twice."""
    await api.ok("mutation($d:JSON!){addWorkflow(definition:$d){id}}", {"d": loan()})
    inst = (await api.ok(START))["startInstance"]
    _, analyst = await api.user("acme", "analyst")
    sock = await Socket.open(ws_url, analyst)
    try:
        await sock.subscribe(
            'subscription{assignmentQueue(team:"analyst"){cursor type assignmentId}}', {}
        )
        await _subscribed(api, 1)
        await api.ok(SUBMIT, {"i": inst["id"]})
        opened = (await sock.next())["assignmentQueue"]
        claim = "mutation($a:ID!){claimAssignment(id:$a){status}}"
        await api.ok(claim, {"a": opened["assignmentId"]}, token=analyst)
        claimed = (await sock.next())["assignmentQueue"]
        await api.ok('mutation($a:ID!){completeAssignment(id:$a,action:"note",'
                     'input:{text:"ok"}){status}}', {"a": opened["assignmentId"]},
                     token=analyst)  # fmt: skip
        done = (await sock.next())["assignmentQueue"]
        seen = [opened, claimed, done]
        assert [e["type"] for e in seen] == [
            "workflow.assigned", "workflow.claimed", "workflow.assignment.completed",
        ]  # fmt: skip
        cursors = [int(e["cursor"]) for e in seen]
        assert cursors == sorted(set(cursors))
        with pytest.raises(TimeoutError):  # nothing more: no message was sent twice
            await sock.next(timeout=0.5)
    finally:
        await sock.close()


async def test_an_outsider_cannot_watch_a_team_queue(api: Api, ws_url: str) -> None:
    _, clerk = await api.user("acme", "clerk")
    sock = await Socket.open(ws_url, clerk)
    try:
        await sock.subscribe('subscription{assignmentQueue(team:"analyst"){type}}', {})
        message = json.loads(await asyncio.wait_for(sock.conn.recv(), 5))
        errors = message["payload"] if message["type"] == "error" else message["payload"]["errors"]
        assert errors[0]["extensions"]["code"] == "FORBIDDEN"
    finally:
        await sock.close()
