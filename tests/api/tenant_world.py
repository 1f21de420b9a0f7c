"""Two tenants on one real stack, for the tenant-isolation tests (issue 10).

`acme` and `globex` each deploy `<tenant>/sales/lead` (an intake state open to any role,
a review state assigned to team `analyst`). Actors: the system admin (the stack's
operator), a tenant admin and an analyst of each tenant, a key with no grants. Also a
small graphql-transport-ws client over a real uvicorn server.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
import websockets
from graph_stack import Api

from stateward.http.ws_protocol import FrameWriterProtocol

LEAD: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/sales/lead",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "review": {"label": "Review", "assign": "analyst"},
        "won": {"label": "Won", "terminal": True},
    },
    "actions": {
        "submit": {"label": "Submit", "from": "intake", "to": "review"},
        "note": {"label": "Note", "mutate": {"$append": {"notes": "input.text"}}},
        "win": {"label": "Win", "role": "analyst", "from": "review", "to": "won"},
    },
}


def lead(path: str) -> dict[str, Any]:
    """The lead workflow deployed at `path`."""
    return {**json.loads(json.dumps(LEAD)), "$path": path}


@dataclass
class Tenant:
    """One tenant: its namespace, admin and analyst (key, token) and an instance id."""

    name: str
    admin: tuple[Any, str]
    analyst: tuple[Any, str]
    instance: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return f"{self.name}/sales/lead"


@dataclass
class World:
    api: Api
    acme: Tenant
    globex: Tenant
    nogrant: tuple[Any, str]


START = "mutation($w:String!,$d:JSON){startInstance(workflow:$w,data:$d){instanceId}}"
ACT = """mutation($i:ID!,$a:String!,$in:JSON){performAction(instance:$i,action:$a,
  input:$in){instance{instanceId data} event{seq}}}"""
DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){path}}"


async def tenant(api: Api, name: str) -> Tenant:
    """Deploy `name/sales/lead`, make its admin and analyst, start one instance."""
    await api.ok(DEPLOY, {"d": lead(f"{name}/sales/lead")})
    t = Tenant(name, await api.user(name, "admin"), await api.user(f"{name}/sales", "analyst"))
    started = await api.ok(START, {"w": t.path, "d": {"secret": f"{name}-data"}},
                           token=t.admin[1])  # fmt: skip
    t.instance = started["startInstance"]["instanceId"]
    return t


async def world(api: Api) -> World:
    """Both tenants and a key without grants."""
    return World(api, await tenant(api, "acme"), await tenant(api, "globex"), await api.user())


def error_of(body: dict[str, Any], *hide: str) -> dict[str, Any]:
    """The first error's message and code, with the given caller-supplied values masked
    (so answers about different ids can be compared for equality)."""
    assert body.get("errors"), body
    error = body["errors"][0]
    message = error["message"]
    for value in hide:
        message = message.replace(value, "<id>")
    return {"message": message, "code": error.get("extensions", {}).get("code")}


def code_of(body: dict[str, Any]) -> str | None:
    """The first error's code (None without errors)."""
    errors = body.get("errors")
    return errors[0].get("extensions", {}).get("code") if errors else None


def names_nothing(body: dict[str, Any], *secrets: str) -> bool:
    """True when the answer's text contains none of `secrets` (paths, states, roles)."""
    text = json.dumps(body)
    return not any(re.search(re.escape(s), text) for s in secrets)


async def serve(
    api: Api, *, frame_writer: bool = True, deflate: bool = False
) -> AsyncIterator[str]:
    """Serve the stack's app on a free port with a real uvicorn; yields the ws URL. As
    `stateward serve` by default: live frames may be written from the fan-out loop
    (`frame_writer`; without it they take the awaited ASGI path) and permessage-deflate
    is not offered (`deflate`)."""
    config = uvicorn.Config(
        api.app, host="127.0.0.1", port=0, lifespan="off", log_level="warning",
        ws=FrameWriterProtocol if frame_writer else "websockets-sansio",
        ws_per_message_deflate=deflate,
    )  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"ws://127.0.0.1:{port}/graphql"
    finally:
        server.should_exit = True
        await task


class Socket:
    """A graphql-transport-ws client: init, subscribe, read messages."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, url: str, token: str) -> Socket:
        conn = await websockets.connect(url, subprotocols=["graphql-transport-ws"])
        payload = {"authorization": f"Bearer {token}"}
        await conn.send(json.dumps({"type": "connection_init", "payload": payload}))
        ack = json.loads(await conn.recv())
        assert ack["type"] == "connection_ack", ack
        return cls(conn)

    async def subscribe(self, query: str, variables: dict[str, Any], op: str = "1") -> None:
        payload = {"query": query, "variables": variables}
        await self.conn.send(json.dumps({"id": op, "type": "subscribe", "payload": payload}))

    async def message(self, timeout: float = 5.0) -> dict[str, Any]:
        """The next message (`next`, `error` or `complete`)."""
        return json.loads(await asyncio.wait_for(self.conn.recv(), timeout))  # type: ignore[no-any-return]

    async def silent(self, seconds: float) -> bool:
        """True when nothing arrives within `seconds`."""
        try:
            await asyncio.wait_for(self.conn.recv(), seconds)
        except TimeoutError:
            return True
        return False

    async def close(self) -> None:
        await self.conn.close()


async def subscribed(api: Api, count: int) -> None:
    """Wait until `count` subscribers are on the node's bus."""
    for _ in range(500):
        if len(api.services.bus.fanout) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("subscription never reached the bus")
