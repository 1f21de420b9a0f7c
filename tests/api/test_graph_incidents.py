"""Incidents through the real app (issue 15): `incidents(filter)`, `retryIncident`,
`resolveIncident`, `bulkRetry`, `node(id)`, the roles and the tenant boundary."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from graph_stack import Api

from stateward.runtime.batches import bulk
from stateward.runtime.hooks import automation
from stateward.runtime.hooks.runner import HookRunner

NS = "acme/ops"
BROKEN = "def check(ctx):\n    fail('upstream down')\n"
FIXED = "def check(ctx):\n    return {'checked': True}\n"
ADD_MODULE = 'mutation($n:String!,$s:String!){addModule(namespace:$n,name:"checks",source:$s){seq}}'
UPDATE_MODULE = (
    'mutation($n:String!,$s:String!){updateModule(namespace:$n,name:"checks",source:$s){seq}}'
)
DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
START = "mutation($w:String!){startInstance(workflow:$w){instanceId}}"
ACT = 'mutation($i:ID!){performAction(instance:$i,action:"submit"){duplicate}}'
STATUS = "query($i:ID!){instance(id:$i){status state{key}}}"
LIST = """query($f:IncidentFilter,$n:Int,$a:String){incidents(filter:$f,first:$n,after:$a){
  edges{cursor node{id incidentId kind instanceId namespace workflowPath state message
  attempts resolved resolution instance{instanceId}}} pageInfo{hasNextPage endCursor}}}"""
RETRY = """mutation($i:ID!){retryIncident(id:$i){incident{attempts resolved resolution}
  instance{status state{key}} event{action input}}}"""
RESOLVE = """mutation($i:ID!,$a:String!,$in:JSON){resolveIncident(id:$i,action:$a,input:$in){
  incident{resolved resolution} instance{status state{key} data}}}"""
BULK = "mutation($n:String!){bulkRetry(filter:{namespace:$n,status:[ERROR]}){id total}}"


@pytest.fixture(autouse=True)
async def hooks(api: Api) -> AsyncIterator[None]:
    """Run system-state hooks on the stack's runtime (an injected runtime starts none)."""
    async with HookRunner(workers=1) as runner:
        run = automation.install(api.runtime, runner)
        yield
        api.runtime.automation.remove(run)


def _flow(path: str) -> dict[str, Any]:
    return {
        "$version": "2.0",
        "$path": path,
        "initial": "intake",
        "states": {
            "intake": {"label": "Intake"},
            "checking": {"label": "Checking", "audience": "system", "hook": "checks:check"},
            "done": {"label": "Done", "terminal": True},
            "manual": {"label": "Manual", "terminal": True},
        },
        "actions": {
            "submit": {"from": "intake", "to": "checking"},
            "pass": {"from": "checking", "to": "done"},
            "by_hand": {"from": "checking", "to": "manual",
                        "mutate": {"$set": {"note": "input.note"}}},
        },
    }  # fmt: skip


def _code(body: dict[str, Any]) -> str:
    return str(body["errors"][0]["extensions"]["code"])


async def _deploy(api: Api, ns: str = NS) -> str:
    await api.ok(ADD_MODULE, {"n": ns, "s": BROKEN})
    await api.ok(DEPLOY, {"d": _flow(f"{ns}/claim")})
    return f"{ns}/claim"


async def _wait_status(api: Api, pid: str, status: str) -> dict[str, Any]:
    for _ in range(200):
        found = (await api.ok(STATUS, {"i": pid}))["instance"]
        if found["status"] == status:
            return found  # type: ignore[no-any-return]
        await asyncio.sleep(0.05)
    raise AssertionError(f"{pid} never became {status}: {found}")


async def _failed(api: Api, path: str) -> str:
    pid = (await api.ok(START, {"w": path}))["startInstance"]["instanceId"]
    await api.ok(ACT, {"i": pid})
    await _wait_status(api, pid, "ERROR")
    return pid  # type: ignore[no-any-return]


async def _incident(api: Api, pid: str, token: str | None = "admin") -> dict[str, Any]:
    rows = await api.ok(LIST, {"f": {"instance": pid}}, token=token)
    [edge] = rows["incidents"]["edges"]
    return edge["node"]  # type: ignore[no-any-return]


async def test_list_retry_with_a_fixed_module_and_node(api: Api) -> None:
    path = await _deploy(api)
    pid = await _failed(api, path)
    incident = await _incident(api, pid)
    assert (incident["kind"], incident["state"], incident["attempts"]) == (
        "HOOK_FAILED", "checking", 1,
    )  # fmt: skip
    assert incident["instance"]["instanceId"] == pid and not incident["resolved"]
    again = (await api.ok(RETRY, {"i": incident["id"]}))["retryIncident"]
    assert again["event"]["action"] == "$retry" and again["event"]["input"]["module"]["hash"]
    assert (again["incident"]["attempts"], again["incident"]["resolved"]) == (2, False)
    await api.ok(UPDATE_MODULE, {"n": NS, "s": FIXED})
    done = (await api.ok(RETRY, {"i": incident["incidentId"]}))["retryIncident"]
    assert done["incident"] == {"attempts": 2, "resolved": True, "resolution": "retried"}
    assert done["instance"] == {"status": "COMPLETED", "state": {"key": "done"}}
    node = await api.ok("query($i:ID!){node(id:$i){... on Incident{kind resolved}}}",
                        {"i": incident["id"]})  # fmt: skip
    assert node["node"] == {"kind": "HOOK_FAILED", "resolved": True}
    resolved = await api.ok(LIST, {"f": {"resolved": True, "kind": ["HOOK_FAILED"]}})
    assert len(resolved["incidents"]["edges"]) == 1
    body = await api.gql(RETRY, {"i": incident["id"]})
    assert _code(body) == "CONFLICT"


async def test_resolve_with_an_action_or_cancel(api: Api) -> None:
    path = await _deploy(api)
    first, second = await _failed(api, path), await _failed(api, path)
    one = await _incident(api, first)
    done = await api.ok(RESOLVE, {"i": one["id"], "a": "by_hand", "in": {"note": "phoned"}})
    assert done["resolveIncident"]["incident"] == {"resolved": True, "resolution": "action:by_hand"}
    assert done["resolveIncident"]["instance"]["data"]["note"] == "phoned"
    two = await _incident(api, second)
    cancelled = await api.ok(RESOLVE, {"i": two["id"], "a": "$cancel", "in": None})
    assert cancelled["resolveIncident"]["instance"]["status"] == "CANCELLED"
    assert _code(await api.gql(RESOLVE, {"i": two["id"], "a": "x", "in": [1]})) == "INVALID_INPUT"


async def test_roles_and_the_tenant_boundary(api: Api) -> None:
    path = await _deploy(api)
    other_path = await _deploy(api, "globex/ops")
    pid = await _failed(api, path)
    foreign = await _failed(api, other_path)
    incident = await _incident(api, pid)
    _, operator = await api.user(NS, "operator")
    _, viewer = await api.user(NS, "viewer")
    _, globex_op = await api.user("globex/ops", "operator")
    _, nobody = await api.user()
    assert _code(await api.gql(RETRY, {"i": incident["id"]}, token=None)) == "UNAUTHENTICATED"
    assert _code(await api.gql(RETRY, {"i": incident["id"]}, token=viewer)) == "FORBIDDEN"
    for token in (globex_op, nobody):
        assert _code(await api.gql(RETRY, {"i": incident["id"]}, token=token)) == "NOT_FOUND"
        body = await api.gql(RESOLVE, {"i": incident["id"], "a": "$cancel"}, token=token)
        assert _code(body) == "NOT_FOUND"
        node = await api.gql("query($i:ID!){node(id:$i){id}}", {"i": incident["id"]},
                             token=token)  # fmt: skip
        assert _code(node) == "NOT_FOUND"
    # listings: each operator sees its own namespace only, whatever the filter says
    mine = await api.ok(LIST, {"f": {}}, token=operator)
    assert [e["node"]["instanceId"] for e in mine["incidents"]["edges"]] == [pid]
    theirs = await api.ok(LIST, {"f": {"namespace": NS}}, token=globex_op)
    assert theirs["incidents"]["edges"] == []
    edges = (await api.ok(LIST, {}, token=globex_op))["incidents"]["edges"]
    assert [e["node"]["instanceId"] for e in edges] == [foreign]
    assert (await api.ok(LIST, {}, token=viewer))["incidents"]["edges"] == []
    body = await api.gql(LIST, {"n": 1000})
    assert _code(body) == "INVALID_INPUT"
    body = await api.gql(LIST, {"a": "garbage"})
    assert _code(body) == "INVALID_INPUT"
    await api.ok(RESOLVE, {"i": incident["id"], "a": "$cancel"}, token=operator)


async def test_paging_with_a_keyset(api: Api) -> None:
    path = await _deploy(api)
    pids = {await _failed(api, path) for _ in range(3)}
    page = (await api.ok(LIST, {"n": 2}))["incidents"]
    assert page["pageInfo"]["hasNextPage"] and len(page["edges"]) == 2
    rest = (await api.ok(LIST, {"n": 2, "a": page["pageInfo"]["endCursor"]}))["incidents"]
    assert not rest["pageInfo"]["hasNextPage"]
    assert {e["node"]["instanceId"] for e in page["edges"] + rest["edges"]} == pids


async def test_bulk_retry_retries_every_instance_in_error(api: Api) -> None:
    path = await _deploy(api)
    pids = [await _failed(api, path) for _ in range(2)]
    await api.ok(UPDATE_MODULE, {"n": NS, "s": FIXED})
    batch = (await api.ok(BULK, {"n": NS}))["bulkRetry"]
    assert batch["total"] == 2
    await bulk.process_running(api.runtime)
    for pid in pids:
        await _wait_status(api, pid, "COMPLETED")
    for pid in pids:
        assert (await _incident(api, pid))["resolution"] == "retried"
    _, viewer = await api.user(NS, "viewer")
    assert _code(await api.gql(BULK, {"n": NS}, token=viewer)) == "FORBIDDEN"


async def test_incident_events_are_pushed_to_subscribers(api: Api) -> None:
    import uvicorn
    from test_graph_subscriptions import EVENTS, Socket, _subscribed, ws_url  # noqa: F401

    config = uvicorn.Config(api.app, host="127.0.0.1", port=0, lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    path = await _deploy(api)
    sock = await Socket.open(f"ws://127.0.0.1:{port}/graphql", api.admin_token)
    try:
        types = ["incident.created", "incident.resolved"]
        await sock.subscribe(EVENTS, {"f": {"types": types, "namespace": NS}})
        await _subscribed(api, 1)
        pid = await _failed(api, path)
        created = (await sock.next(timeout=15))["events"]
        assert (created["type"], created["eventType"]) == ("incident.created", "INCIDENT_CREATED")
        assert created["instanceId"] == pid
        incident = await _incident(api, pid)
        await api.ok(RESOLVE, {"i": incident["id"], "a": "$cancel"})
        resolved = (await sock.next(timeout=15))["events"]
        assert (resolved["type"], resolved["instanceId"]) == ("incident.resolved", pid)
    finally:
        await sock.close()
        server.should_exit = True
        await task
