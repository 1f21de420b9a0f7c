"""`stateward serve` as a real process on SQLite: a full scenario over HTTP and a websocket.

deploy -> start -> act -> claim -> complete, while a `graphql-transport-ws` subscriber
watches the namespace: it sees every event in cursor order, exactly the events a replay
from the outbox (`after: "0"`) gives, and the process stops cleanly on SIGTERM.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Client, ServerProcess, Subscriber, cursors, login

from stateward.governance.keys import KeyPair, read_key_file

pytestmark = pytest.mark.slow

NAMESPACE = "e2e/orders"
ORDER: dict[str, Any] = {
    "$version": "2.0",
    "$path": "e2e/orders/order",
    "$description": "An order that a reviewer approves",
    "initial": "draft",
    "states": {
        "draft": {"label": "Draft"},
        "review": {"label": "Review", "assign": "reviewer", "sla_seconds": 3600},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "submit": {
            "label": "Submit",
            "from": "draft",
            "to": "review",
            "mutate": {"$set": {"amount": "input.amount"}},
        },
        "approve": {"label": "Approve", "role": "reviewer", "from": "review", "to": "done"},
    },
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A `stateward serve` process on a fresh SQLite file, memory bus, loopback port."""
    env = {
        "STATEWARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'e2e.db'}",
        "STATEWARD_BUS_URL": "memory://",
        "STATEWARD_OPERATOR_KEY_FILE": str(tmp_path / "operator.json"),
        "STATEWARD_SCAN_INTERVAL": "0.5",
    }
    proc = ServerProcess(env=env, cwd=tmp_path).start()
    yield proc
    proc.stop()


@pytest.fixture
def operator(server: ServerProcess, tmp_path: Path) -> KeyPair:
    """The operator key the server generated for the genesis of the fresh database."""
    assert "initialized a new deployment" in server.output()
    return read_key_file(tmp_path / "operator.json")


@pytest.fixture
async def admin(server: ServerProcess, operator: KeyPair) -> AsyncIterator[Client]:
    """A client logged in as the operator (challenge signed with the operator key)."""
    client = Client(server.url, await login(server.url, operator))
    yield client
    await client.close()


async def run_order_scenario(admin: Client, operator: KeyPair) -> str:
    """deploy -> start -> submit -> claim -> complete(approve); returns the instance id."""
    await admin.ok(
        'mutation($n:String!,$a:String!){grantRole(namespace:$n,actor:$a,roles:["reviewer"])'
        "{namespace}}",
        {"n": NAMESPACE, "a": operator.public},
    )
    await admin.ok("mutation($d:JSON!){addWorkflow(definition:$d){path version}}", {"d": ORDER})
    started = await admin.ok(
        'mutation{startInstance(workflow:"e2e/orders/order",data:{customer:"ada"}){instanceId}}'
    )
    instance = started["startInstance"]["instanceId"]
    await admin.ok(
        'mutation($i:ID!){performAction(instance:$i,action:"submit",input:{amount:5}){duplicate}}',
        {"i": instance},
    )
    return str(instance)


async def test_a_full_scenario_reaches_the_websocket_subscriber_in_order(
    server: ServerProcess, admin: Client, operator: KeyPair
) -> None:
    token = admin.headers["Authorization"].split()[1]
    live = await Subscriber(server.ws_url, token, {"f": {"namespace": NAMESPACE}}).start()
    try:
        instance = await run_order_scenario(admin, operator)
        events = await live.wait_for(lambda ev: any(e["type"] == "workflow.assigned" for e in ev))
        assignment = next(e for e in events if e["type"] == "workflow.assigned")["assignmentId"]
        await admin.ok("mutation($i:ID!){claimAssignment(id:$i){status}}", {"i": assignment})
        done = await admin.ok(
            "mutation($i:ID!){completeAssignment(id:$i,reviewData:{ok:true},"
            'action:"approve"){status}}',
            {"i": assignment},
        )
        assert done["completeAssignment"]["status"] == "COMPLETED"
        events = await live.wait_for(lambda ev: any(e["type"] == "workflow.completed" for e in ev))
        replay = await Subscriber(
            server.ws_url, token, {"f": {"namespace": NAMESPACE}, "a": "0"}
        ).start()
        try:
            replayed = await replay.wait_for(lambda ev: len(ev) >= len(events))
        finally:
            await replay.close()
    finally:
        await live.close()

    types = [e["type"] for e in events]
    expected = [
        "registry.role.granted",
        "workflow.deployed",
        "workflow.started",
        "workflow.assigned",
        "workflow.claimed",
        "workflow.assignment.completed",
        "workflow.completed",
    ]
    assert [t for t in types if t in expected] == expected
    assert cursors(events) == sorted(set(cursors(events)))  # in order, no duplicate
    assert cursors(replayed) == cursors(events)  # no gap: live saw every outbox row
    assert {e["instanceId"] for e in events if e["type"].startswith("workflow.a")} == {instance}
    state = await admin.ok("query($i:ID!){instance(id:$i){status state{key}}}", {"i": instance})
    assert state["instance"] == {"status": "COMPLETED", "state": {"key": "done"}}


async def test_serve_reports_ready_and_stops_cleanly_on_sigterm(server: ServerProcess) -> None:
    client = Client(server.url.removesuffix("/graphql") + "/readyz")
    try:
        response = await client.http.get(client.url)
    finally:
        await client.close()
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": True, "bus": True}
    assert server.stop() == 0
