"""TIMER_FAILED and WEBHOOK_EXHAUSTED incidents through the real app (issue 15):
`incidents(filter: {kind})`, `retryIncident`, `resolveIncident`, `Incident.deliveryId`,
and `bulkRetry`'s `$retry` recording the module hash like `retryIncident`."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from graph_stack import Api
from test_graph_webhooks import Receiver

from stateward.runtime.batches import bulk
from stateward.runtime.sweeps import scheduler, sla, webhooks

NS = "acme/ops"
DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
START = "mutation($w:String!){startInstance(workflow:$w){instanceId}}"
ACT = "mutation($i:ID!,$a:String!){performAction(instance:$i,action:$a){duplicate}}"
STATUS = "query($i:ID!){instance(id:$i){status state{key}}}"
WEBHOOK = 'mutation($n:String!,$u:String!){setWebhook(namespace:$n,url:$u,secret:"k"){seq}}'
LIST = """query($f:IncidentFilter){incidents(filter:$f){edges{node{id incidentId kind
  instanceId state message attempts resolved resolution deliveryId}}}}"""
RETRY = """mutation($i:ID!){retryIncident(id:$i){incident{attempts resolved resolution}
  instance{status state{key}} event{action input}}}"""
RESOLVE = """mutation($i:ID!,$a:String!){resolveIncident(id:$i,action:$a){
  incident{resolved resolution} instance{status state{key}}}}"""


def _timed(path: str, *, timer: bool = True) -> dict[str, Any]:
    """A timer whose action breaks its own `then` (or, without `timer`, a 1 s SLA)."""
    flow: dict[str, Any] = {
        "$version": "2.0",
        "$path": path,
        "initial": "intake",
        "states": {
            "intake": {"label": "Intake"},
            "waiting": {"label": "Waiting"},
            "expired": {"label": "Expired", "terminal": True},
            "closed": {"label": "Closed", "terminal": True},
        },
        "actions": {
            "open": {
                "from": "intake",
                "to": "waiting",
                "schedule": [{"action": "expire", "after": 1, "key": "t"}],
            },
            "expire": {
                "from": "waiting",
                "to": "expired",
                "mutate": {"$set": {"note": "input.note"}},
                "then": "note IS NOT NULL",
            },
            "close": {"from": "waiting", "to": "closed"},
        },
    }
    if not timer:
        del flow["actions"]["open"]["schedule"]
        flow["states"]["waiting"]["sla_seconds"] = 1
    return flow


def _code(body: dict[str, Any]) -> str:
    return str(body["errors"][0]["extensions"]["code"])


async def _started(api: Api, path: str, *, timer: bool = True) -> str:
    await api.ok(DEPLOY, {"d": _timed(path, timer=timer)})
    pid = (await api.ok(START, {"w": path}))["startInstance"]["instanceId"]
    await api.ok(ACT, {"i": pid, "a": "open"})
    return pid  # type: ignore[no-any-return]


async def _incident(api: Api, pid: str, kind: str) -> dict[str, Any]:
    for _ in range(100):
        rows = await api.ok(LIST, {"f": {"instance": pid, "kind": [kind]}})
        if rows["incidents"]["edges"]:
            [edge] = rows["incidents"]["edges"]
            return edge["node"]  # type: ignore[no-any-return]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {kind} incident for {pid}")


async def test_a_failed_timer_is_an_incident_retried_and_resolved(api: Api) -> None:
    pid = await _started(api, f"{NS}/expiry")
    await asyncio.sleep(1.1)
    await scheduler.fire_due(api.runtime)
    incident = await _incident(api, pid, "TIMER_FAILED")
    assert (incident["state"], incident["attempts"], incident["deliveryId"]) == ("waiting", 1, None)
    assert "POSTCONDITION_FAILED" in incident["message"]
    assert (await api.ok(STATUS, {"i": pid}))["instance"]["status"] == "ERROR"
    again = (await api.ok(RETRY, {"i": incident["id"]}))["retryIncident"]
    assert again["event"]["action"] == "$retry"
    assert again["event"]["input"]["timer"]["action"] == "expire"
    assert again["incident"] == {"attempts": 2, "resolved": False, "resolution": None}
    assert again["instance"]["status"] == "ERROR"
    _, viewer = await api.user(NS, "viewer")
    assert _code(await api.gql(RETRY, {"i": incident["id"]}, token=viewer)) == "FORBIDDEN"
    done = (await api.ok(RESOLVE, {"i": incident["id"], "a": "close"}))["resolveIncident"]
    assert done["incident"] == {"resolved": True, "resolution": "action:close"}
    assert done["instance"] == {"status": "COMPLETED", "state": {"key": "closed"}}


async def test_an_exhausted_webhook_is_an_incident_retried_until_delivered(api: Api) -> None:
    receiver = Receiver(statuses=[500] * (webhooks.MAX_ATTEMPTS + 1))
    try:
        await api.ok(WEBHOOK, {"n": NS, "u": receiver.url})
        pid = await _started(api, f"{NS}/slow", timer=False)
        await asyncio.sleep(1.1)
        await sla.scan(api.runtime)
        at = api.runtime.clock.now()
        for _ in range(webhooks.MAX_ATTEMPTS):
            await webhooks.deliver_due(api.runtime, at)
            at += timedelta(seconds=webhooks.MAX_DELAY_S)
        incident = await _incident(api, pid, "WEBHOOK_EXHAUSTED")
        assert incident["attempts"] == webhooks.MAX_ATTEMPTS and incident["deliveryId"]
        assert "workflow.sla.breached" in incident["message"]
        retried = (await api.ok(RETRY, {"i": incident["id"]}))["retryIncident"]
        assert retried["event"]["input"]["delivery"] == incident["deliveryId"]
        assert retried["instance"]["status"] == "ACTIVE"  # never stopped by a webhook
        assert _code(await api.gql(RETRY, {"i": incident["id"]})) == "CONFLICT"
        body = await api.gql(RESOLVE, {"i": incident["id"], "a": "close"})
        assert _code(body) == "INVALID_INPUT"
        for _ in range(2):  # one more 500, then 200
            await webhooks.deliver_due(api.runtime, at)
            at += timedelta(seconds=webhooks.MAX_DELAY_S)
    finally:
        receiver.close()
    done = await _incident(api, pid, "WEBHOOK_EXHAUSTED")
    assert (done["resolved"], done["resolution"]) == (True, "delivered")


BROKEN = "def check(ctx):\n    fail('upstream down')\n"
FIXED = "def check(ctx):\n    return {'checked': True}\n"


async def test_bulk_retry_records_the_module_hash_in_each_event(api: Api) -> None:
    from stateward.runtime.hooks import automation
    from stateward.runtime.hooks.runner import HookRunner

    flow = {
        "$version": "2.0",
        "$path": f"{NS}/claim",
        "initial": "intake",
        "states": {
            "intake": {"label": "Intake"},
            "checking": {"label": "Checking", "audience": "system", "hook": "checks:check"},
            "done": {"label": "Done", "terminal": True},
        },
        "actions": {
            "submit": {"from": "intake", "to": "checking"},
            "pass": {"from": "checking", "to": "done"},
        },
    }
    module = 'mutation($n:String!,$s:String!){%s(namespace:$n,name:"checks",source:$s){seq}}'
    events = "query($i:ID!){instance(id:$i){status events{edges{node{action input}}}}}"
    async with HookRunner(workers=1) as runner:
        run = automation.install(api.runtime, runner)
        try:
            await api.ok(module % "addModule", {"n": NS, "s": BROKEN})
            await api.ok(DEPLOY, {"d": flow})
            pid = (await api.ok(START, {"w": flow["$path"]}))["startInstance"]["instanceId"]
            await api.ok(ACT, {"i": pid, "a": "submit"})
            incident = await _incident(api, pid, "HOOK_FAILED")
            await api.ok(module % "updateModule", {"n": NS, "s": FIXED})
            batch = "mutation($n:String!){bulkRetry(filter:{namespace:$n,status:[ERROR]}){total}}"
            assert (await api.ok(batch, {"n": NS}))["bulkRetry"]["total"] == 1
            await bulk.process_running(api.runtime)
            for _ in range(200):
                found = (await api.ok(events, {"i": pid}))["instance"]
                if found["status"] == "COMPLETED":
                    break
                await asyncio.sleep(0.05)
        finally:
            api.runtime.automation.remove(run)
    assert found["status"] == "COMPLETED"
    log = [edge["node"] for edge in found["events"]["edges"]]
    [retried] = [e for e in log if e["action"] == "$retry"]
    [ran] = [e for e in log if e["action"] == "$automate"][-1:]
    assert retried["input"]["module"]["hash"] == ran["input"]["module"]["hash"]
    assert retried["input"]["incident"] == incident["incidentId"]
    assert retried["input"]["hook"] == "checks:check"
