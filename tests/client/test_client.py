"""`stateward.client` against a real server: local signing, the kernel operations, and a
subscription that survives a server restart without a gap or a duplicate."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from client_server import server_env
from e2e.harness import ServerProcess

from stateward.client import BusEvent, Client, StatewardError, canonical, signing
from stateward.governance.keys import b64url_decode

pytestmark = pytest.mark.slow

TICKET: dict[str, Any] = {
    "$version": "2.0",
    "$path": "client/desk/ticket",
    "initial": "open",
    "states": {
        "open": {"label": "Open"},
        "triage": {"label": "Triage", "assign": "agent"},
        "closed": {"label": "Closed", "terminal": True},
    },
    "actions": {
        "note": {"label": "Note", "from": "open", "mutate": {"$append": {"notes": "input.text"}}},
        "escalate": {"label": "Escalate", "from": "open", "to": "triage"},
        "close": {"label": "Close", "role": "agent", "from": "triage", "to": "closed"},
    },
}


async def deploy(client: Client) -> None:
    await client.query(
        'mutation($n: String!, $a: String!) { grantRole(namespace: $n, actor: $a, roles: ["agent"])'
        " { namespace } }",
        {"n": "client/desk", "a": client.key.public if client.key else ""},
    )
    await client.query(
        "mutation($d: JSON!) { addWorkflow(definition: $d) { path } }", {"d": TICKET}
    )


def test_canonical_bytes_follow_rfc_8785() -> None:
    assert canonical({"b": 1, "a": [1.0, "é", None]}) == '{"a":[1,"é",null],"b":1}'.encode()


def test_the_clients_nonces_begin_with_the_time_and_end_with_16_random_bytes() -> None:
    """As the server's own (`envelope.new_nonce`): the time keeps the log's (actor, nonce)
    index writing a few pages, the random bytes keep nonces unique."""
    before = int(time.time() * 1000)
    raw = [b64url_decode(signing.nonce()) for _ in range(50)]
    after = int(time.time() * 1000)
    assert all(len(r) == 22 and before <= int.from_bytes(r[:6], "big") <= after for r in raw)
    assert len({r[6:] for r in raw}) == 50
    made = signing.envelope("net", "p", "tick", "a/b", {}, "actor")
    assert before <= int.from_bytes(b64url_decode(made["nonce"])[:6], "big")


async def test_a_key_signs_locally_and_the_log_names_it_as_signer(
    server: ServerProcess, tmp_path: Path
) -> None:
    async with Client(server.url, key=tmp_path / "operator.json") as sw:
        await deploy(sw)
        started = await sw.start("client/desk/ticket", {"customer": "ada"})
        assert (started.state, started.status, started.seq) == ("open", "ACTIVE", 1)
        assert started.event["signer"] == sw.key.public == started.event["actor"]
        signed = await sw.sign(started.instance_id, "note", "client/desk/ticket", {"text": "hi"})
        noted = await sw.submit(signed)
        assert noted.data["notes"] == ["hi"] and not noted.duplicate
        again = await sw.submit(signed)  # the exact same envelope: the original event
        assert again.duplicate and again.seq == noted.seq
        tampered = {**signed, "event": {**signed["event"], "nonce": "A" * 22}}
        with pytest.raises(StatewardError) as refused:
            await sw.submit(tampered)
        assert refused.value.code == "BAD_SIGNATURE"


async def test_advance_claim_and_complete_go_through_signed_kernel_events(
    server: ServerProcess, tmp_path: Path
) -> None:
    async with Client(server.url, key=tmp_path / "operator.json") as sw:
        await deploy(sw)
        started = await sw.start("client/desk/ticket")
        escalated = await sw.act(started.instance_id, "escalate")
        assert escalated.state == "triage"
        queue = await sw.query(
            '{ assignments(filter: {team: "agent", status: [UNASSIGNED]}) { edges { node { '
            "assignmentId "
            "instanceId } } } }"
        )
        (assignment,) = [
            e["node"]["assignmentId"]
            for e in queue["assignments"]["edges"]
            if e["node"]["instanceId"] == started.instance_id
        ]
        claimed = await sw.claim(assignment)
        assert claimed.event["action"] == "$claim" and claimed.event["signer"] == sw.key.public
        done = await sw.complete(assignment, {"verdict": "fine"}, action="close")
        assert done.state == "closed" and done.status == "COMPLETED"


async def test_a_client_without_a_key_cannot_sign() -> None:
    async with Client("http://127.0.0.1:9/graphql") as sw:
        with pytest.raises(StatewardError) as refused:
            await sw.sign("p", "note", "a/b/c")
        assert refused.value.code == "NO_KEY"


async def test_a_subscription_survives_a_server_restart_without_gap_or_duplicate(
    tmp_path: Path,
) -> None:
    env = server_env(tmp_path)
    first = ServerProcess(env=env, cwd=tmp_path).start()
    port = first.url.rsplit(":", 1)[1].split("/")[0]
    url = first.url
    received: list[BusEvent] = []
    restarted = None
    try:
        async with Client(url, key=tmp_path / "operator.json") as sw:
            await deploy(sw)
            started = await sw.start("client/desk/ticket")
            instance = started.instance_id

            async def consume() -> None:
                async for event in sw.subscribe({"instance": instance}, after="0"):
                    received.append(event)
                    if event.type == "workflow.completed":
                        return

            consumer = asyncio.create_task(consume())
            await sw.act(instance, "note", {"text": "before"})
            await _until(lambda: len(received) >= 2)
            first.stop()
            restarted = ServerProcess("--port", port, env=env, cwd=tmp_path).start()
            assert restarted.url == url
            await sw.act(instance, "note", {"text": "after"})
            await sw.act(instance, "escalate")
            await _claim_and_close(sw, instance)
            await asyncio.wait_for(consumer, 30)
            replay = [e async for e in _take_all(sw, instance)]
    finally:
        first.stop()
        if restarted is not None:
            restarted.stop()
    cursors = [e.cursor for e in received]
    assert cursors == sorted(set(cursors)), "in order, each once"
    assert cursors == [e.cursor for e in replay], "exactly what the outbox holds"
    assert [e.type for e in received][:2] == ["workflow.started", "workflow.updated"]


async def _claim_and_close(sw: Client, instance: str) -> None:
    queue = await sw.query(
        '{ assignments(filter: {team: "agent", status: [UNASSIGNED]}) { edges { node { '
        "assignmentId "
        "instanceId } } } }"
    )
    (assignment,) = [
        e["node"]["assignmentId"]
        for e in queue["assignments"]["edges"]
        if e["node"]["instanceId"] == instance
    ]
    await sw.claim(assignment)
    await sw.complete(assignment, {"ok": True}, action="close")


async def _take_all(sw: Client, instance: str):  # type: ignore[no-untyped-def]
    async for event in sw.subscribe({"instance": instance}, after="0"):
        yield event
        if event.type == "workflow.completed":
            return


async def _until(condition: Any, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.05)
