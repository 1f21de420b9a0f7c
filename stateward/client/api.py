"""`Client`: GraphQL over HTTP (`httpx`) and graphql-transport-ws (`websockets`).

Reads go through `query`; writes are envelopes signed locally by the client's key and sent
to `submitEvent` (`start`, `act`, `advance`, `claim`, `complete`, or `submit` for an
envelope you built). `subscribe` is an async iterator of bus events that reconnects and
resumes with `after:` the last cursor it yielded, so nothing is missed or repeated.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import websockets

from stateward.client.signing import Key, envelope, new_process_id, sign_envelope

RESULT = """duplicate event { seq action actor signer }
  instance { instanceId workflowPath status seq data state { key } }"""
SUBMIT = f"""mutation($e: JSON!, $s: String!, $k: String!) {{
  submitEvent(event: $e, signature: $s, signer: $k) {{ {RESULT} }} }}"""
EVENTS = """subscription($f: EventFilter, $a: String) { events(filter: $f, after: $a) {
  id cursor type at namespace workflow version instanceId actor action fromState toState
  assignmentId team details } }"""
#: Close codes and error codes after which `subscribe` resumes instead of failing.
RESUMABLE = frozenset({"SLOW_CONSUMER", "BUS_STOPPED", "UNAVAILABLE"})
REFUSED_CLOSE = 4403


class StatewardError(Exception):
    """The server refused a request: `code` is the stable `extensions.code`."""

    def __init__(self, code: str, message: str, extensions: Mapping[str, Any] | None = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.extensions = dict(extensions or {})


@dataclass(frozen=True)
class ActionResult:
    """What one submitted event did. `status` is the schema's `InstanceStatus` value
    (`ACTIVE`, `STALE`, `COMPLETED`, `CANCELLED`, `ERROR`), spelled as `query` returns it."""

    instance_id: str
    workflow: str
    state: str
    status: str
    seq: int
    data: dict[str, Any]
    duplicate: bool
    event: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> ActionResult:
        """From the `ActionResult` selection the client asks for."""
        instance = value["instance"]
        return cls(
            instance_id=instance["instanceId"],
            workflow=instance["workflowPath"],
            state=instance["state"]["key"],
            status=str(instance["status"]),  # the enum value as the schema sends it
            seq=instance["seq"],
            data=instance["data"],
            duplicate=value["duplicate"],
            event=value["event"],
        )


@dataclass(frozen=True)
class BusEvent:
    """One event of the `events` subscription (DESIGN §9); `cursor` orders them."""

    cursor: int
    type: str
    instance_id: str | None
    workflow: str | None
    from_state: str | None
    to_state: str | None
    action: str | None
    actor: str | None
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> BusEvent:
        """From the `BusEvent` GraphQL object."""
        return cls(
            cursor=int(value["cursor"]),
            type=value["type"],
            instance_id=value.get("instanceId"),
            workflow=value.get("workflow"),
            from_state=value.get("fromState"),
            to_state=value.get("toState"),
            action=value.get("action"),
            actor=value.get("actor"),
            raw=dict(value),
        )


def _raise_first(errors: list[Mapping[str, Any]]) -> None:
    first = errors[0]
    extensions = first.get("extensions") or {}
    raise StatewardError(str(extensions.get("code", "ERROR")), first.get("message", ""), extensions)


class Client:
    """A stateward deployment seen from one key (or one bearer token).

    `url` is the GraphQL endpoint (`http://host:port/graphql`). With `key` (a `Key`, or
    the path of a `stateward keygen` key file) the client logs in on first use and signs
    events itself; with only `token` it can read and subscribe. Use it as an async context
    manager or call `aclose()`.
    """

    def __init__(
        self,
        url: str,
        *,
        key: Key | str | os.PathLike[str] | None = None,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.url = url
        self.key = key if isinstance(key, Key) or key is None else Key.from_file(key)
        self.token = token
        self._http = httpx.AsyncClient(timeout=timeout)
        self._net: str | None = None
        self._workflows: dict[str, str] = {}

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._http.aclose()

    # -- reading --------------------------------------------------------------------------

    async def query(self, document: str, variables: Mapping[str, Any] | None = None) -> Any:
        """`data` of a GraphQL operation; raises `StatewardError` for the first error."""
        token = await self._token()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        body = {"query": document, "variables": dict(variables or {})}
        response = await self._http.post(self.url, json=body, headers=headers)
        payload = response.json()
        if payload.get("errors"):
            _raise_first(payload["errors"])
        return payload["data"]

    async def net(self) -> str:
        """The deployment's id, which every envelope names (read once)."""
        if self._net is None:
            response = await self._http.post(self.url, json={"query": "{ net }"})
            payload = response.json()
            if payload.get("errors"):
                _raise_first(payload["errors"])
            self._net = str(payload["data"]["net"])
        return self._net

    async def login(self) -> str:
        """A session token for `key` (challenge signed with it); kept for later calls."""
        key = self._require_key()
        data = await self._anonymous(
            "mutation($k: String!) { authChallenge(publicKey: $k) { challenge } }",
            {"k": key.public},
        )
        challenge = data["authChallenge"]["challenge"]
        data = await self._anonymous(
            "mutation($k: String!, $c: String!, $s: String!) {"
            " authLogin(publicKey: $k, challenge: $c, signature: $s) { token } }",
            {"k": key.public, "c": challenge, "s": key.sign(challenge.encode())},
        )
        self.token = str(data["authLogin"]["token"])
        return self.token

    # -- writing ----------------------------------------------------------------------------

    async def sign(
        self, process: str, action: str, workflow: str, input: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """A signed envelope (`{"event", "signer", "signature"}`) for `submit`."""
        key = self._require_key()
        value = envelope(await self.net(), process, action, workflow, dict(input or {}), key.public)
        return sign_envelope(value, key)

    async def submit(self, signed: Mapping[str, Any]) -> ActionResult:
        """Send a signed envelope; resubmitting the same one gives `duplicate=True`."""
        data = await self.query(
            SUBMIT, {"e": signed["event"], "s": signed["signature"], "k": signed["signer"]}
        )
        return ActionResult.from_json(data["submitEvent"])

    async def start(
        self,
        workflow: str,
        data: Mapping[str, Any] | None = None,
        *,
        instance_id: str | None = None,
    ) -> ActionResult:
        """Start an instance of `workflow` (the latest version) with `data`."""
        process = instance_id or new_process_id()
        result = await self.submit(
            await self.sign(process, "$start", workflow, {"data": data or {}})
        )
        self._workflows[result.instance_id] = result.workflow
        return result

    async def act(
        self, instance: str, action: str, input: Mapping[str, Any] | None = None
    ) -> ActionResult:
        """Perform a business `action` of the instance's workflow with `input`."""
        workflow = await self._workflow_of(instance)
        return await self.submit(await self.sign(instance, action, workflow, input))

    async def advance(self, instance: str, input: Mapping[str, Any] | None = None) -> ActionResult:
        """Take the first applicable action from the current state (`$advance`)."""
        return await self.act(instance, "$advance", input)

    async def claim(self, assignment: str) -> ActionResult:
        """Claim an unassigned assignment of a team the key belongs to (`$claim`)."""
        instance = await self._instance_of_assignment(assignment)
        return await self.act(instance, "$claim", {"assignment": assignment})

    async def complete(
        self,
        assignment: str,
        review_data: Mapping[str, Any] | None = None,
        action: str | None = None,
    ) -> ActionResult:
        """Complete a claimed assignment: record `review_data`, perform `action` (or advance)."""
        instance = await self._instance_of_assignment(assignment)
        input: dict[str, Any] = {"assignment": assignment}
        if review_data is not None:
            input["reviewData"] = dict(review_data)
        if action is not None:
            input["action"] = action
        return await self.act(instance, "$complete", input)

    # -- subscribing --------------------------------------------------------------------------

    async def subscribe(
        self,
        filter: Mapping[str, Any] | None = None,
        after: str | int | None = None,
        *,
        retry_delay: float = 0.2,
        max_retry_delay: float = 2.0,
        give_up_after: float | None = 120.0,
    ) -> AsyncIterator[BusEvent]:
        """Bus events matching `filter` (`types`, `namespace`, `workflow`, `instance`,
        `team`), from cursor `after` (`"0"`: everything kept in the outbox; None: from now).

        A dropped connection, a server restart or a SLOW_CONSUMER/BUS_STOPPED end is
        followed by a reconnect that resumes after the last cursor yielded (no gap, no
        duplicate); it gives up with the last error after `give_up_after` seconds of
        failing to reconnect. Other errors raise `StatewardError`.
        """
        cursor = None if after is None else str(after)
        delay = retry_delay
        failing_since: float | None = None
        loop = asyncio.get_running_loop()
        while True:
            try:
                async for event in self._stream(filter, cursor):
                    cursor = str(event.cursor)
                    failing_since, delay = None, retry_delay
                    yield event
                failure: Exception = ConnectionError("subscription completed by the server")
            except StatewardError as error:
                if error.code not in RESUMABLE:
                    raise
                failure = error
            except (TimeoutError, OSError, websockets.WebSocketException) as error:
                failure = error
            now = loop.time()
            failing_since = failing_since if failing_since is not None else now
            if give_up_after is not None and now - failing_since > give_up_after:
                raise failure
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_retry_delay)

    async def _stream(
        self, filter: Mapping[str, Any] | None, after: str | None
    ) -> AsyncIterator[BusEvent]:
        """One websocket connection's worth of events."""
        token = await self._token()
        ws_url = "ws" + self.url[len("http") :] if self.url.startswith("http") else self.url
        async with websockets.connect(ws_url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            init: dict[str, Any] = {"type": "connection_init"}
            if token:
                init["payload"] = {"authorization": f"Bearer {token}"}
            await ws.send(json.dumps(init))
            try:
                ack = json.loads(await asyncio.wait_for(ws.recv(), 10))
            except websockets.ConnectionClosed as closed:
                if closed.rcvd is not None and closed.rcvd.code == REFUSED_CLOSE:
                    raise StatewardError("UNAUTHENTICATED", closed.rcvd.reason) from closed
                raise
            if ack.get("type") != "connection_ack":
                raise StatewardError("PROTOCOL", f"expected connection_ack, got {ack}")
            variables = {"f": dict(filter) if filter else None, "a": after}
            await ws.send(
                json.dumps(
                    {
                        "id": "1",
                        "type": "subscribe",
                        "payload": {"query": EVENTS, "variables": variables},
                    }
                )
            )
            async for raw in ws:
                message = json.loads(raw)
                kind = message.get("type")
                if kind == "next":
                    payload = message["payload"]
                    if payload.get("errors"):
                        _raise_first(payload["errors"])
                    yield BusEvent.from_json(payload["data"]["events"])
                elif kind == "error":
                    _raise_first(message["payload"])
                elif kind == "complete":
                    return
                elif kind == "ping":
                    await ws.send(json.dumps({"type": "pong"}))

    # -- helpers ------------------------------------------------------------------------------

    def _require_key(self) -> Key:
        if self.key is None:
            raise StatewardError("NO_KEY", "this client has no key to sign with (pass key=)")
        return self.key

    async def _token(self) -> str | None:
        if self.token is None and self.key is not None:
            await self.login()
        return self.token

    async def _anonymous(self, document: str, variables: Mapping[str, Any]) -> Any:
        response = await self._http.post(self.url, json={"query": document, "variables": variables})
        payload = response.json()
        if payload.get("errors"):
            _raise_first(payload["errors"])
        return payload["data"]

    async def _workflow_of(self, instance: str) -> str:
        if instance not in self._workflows:
            data = await self.query(
                "query($i: ID!) { instance(id: $i) { workflowPath } }", {"i": instance}
            )
            self._workflows[instance] = data["instance"]["workflowPath"]
        return self._workflows[instance]

    async def _instance_of_assignment(self, assignment: str) -> str:
        node_id = base64.b64encode(f"Assignment:{assignment}".encode()).decode("ascii")
        data = await self.query(
            "query($n: ID!) { node(id: $n) { ... on Assignment { instanceId } } }", {"n": node_id}
        )
        if not data.get("node"):
            raise StatewardError("NOT_FOUND", f"assignment {assignment} does not exist")
        return str(data["node"]["instanceId"])
