"""DSL 2.1 through the GraphQL API (issue 14), on SQLite and PostgreSQL:

- a spawn-only workflow refuses `startInstance`;
- the parent's view (`Instance.children`) lists its children with their status, across the
  namespaces the viewer may read (a child spawned into another namespace under its
  `allow_spawn` grant included), and only those;
- `NO_APPLICABLE_ACTION` says when the cause is a missing role (message and
  `extensions.details.missingRoles`);
- form values sent flat say to send them under `input.fields`;
- an anonymous visitor's errors never show the instance UUID and never say "process".
"""

from __future__ import annotations

import json
from typing import Any

from graph_stack import Api

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){path}}"
START = "mutation($w:String!,$d:JSON){startInstance(workflow:$w,data:$d){instanceId}}"
ACT = (
    "mutation($i:ID!,$a:String!,$in:JSON){performAction(instance:$i,action:$a,input:$in)"
    "{instance{instanceId status}}}"
)
ADVANCE = "mutation($i:ID!){advance(instance:$i){instance{instanceId}}}"
CHILDREN = (
    "query($i:ID!){instance(id:$i){status children{edges{node"
    "{instanceId namespace workflowPath status}}}}}"
)

LOCAL_TASK: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/task",
    "initial": "open",
    "start": {"spawn_only": True},
    "states": {
        "open": {"label": "Open"},
        "done": {"label": "Done", "terminal": True, "returns": ["note"]},
    },
    "actions": {
        "finish": {"from": "open", "to": "done", "mutate": {"$set": {"note": "input.note"}}},
    },
}
REMOTE_TASK: dict[str, Any] = {**LOCAL_TASK, "$path": "fin/pay/payment"}
PARENT: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/order",
    "initial": "draft",
    "states": {
        "draft": {"label": "Draft"},
        "parallel": {"label": "At work", "await": {"children": "all", "then": "joined"}},
        "ready": {"label": "Ready", "terminal": True},
    },
    "actions": {
        "begin": {
            "from": "draft",
            "to": "parallel",
            "spawn": [
                {"workflow": "ops/desk/task", "each": {"$ref": "data.teams"}},
                {"workflow": "fin/pay/payment", "data": {"amount": {"$ref": "data.amount"}}},
            ],
        },
        "joined": {
            "role": "system",
            "from": "parallel",
            "to": "ready",
            "mutate": {"$set": {"results": "input.children"}},
        },
    },
}


async def _children(api: Api, pid: str, token: str = "admin") -> dict[str, tuple[str, str]]:
    body = await api.ok(CHILDREN, {"i": pid}, token=token)
    edges = body["instance"]["children"]["edges"]
    return {e["node"]["instanceId"]: (e["node"]["namespace"], e["node"]["status"]) for e in edges}


async def test_the_parents_view_lists_its_children_with_status_across_readable_namespaces(
    api: Api,
) -> None:
    await api.ok(DEPLOY, {"d": LOCAL_TASK})
    await api.ok(DEPLOY, {"d": REMOTE_TASK})
    await api.ok('mutation{allowSpawn(namespace:"fin/pay",to:"ops/desk"){namespace}}')
    await api.ok(DEPLOY, {"d": PARENT})
    # A spawn-only workflow refuses `startInstance`, even to an admin.
    refused = await api.gql(START, {"w": REMOTE_TASK["$path"], "d": {}})
    assert refused["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    assert "spawn" in refused["errors"][0]["message"]
    data = {"teams": ["hr", "it"], "amount": 120}
    pid = (await api.ok(START, {"w": PARENT["$path"], "d": data}))["startInstance"]["instanceId"]
    await api.ok(ACT, {"i": pid, "a": "begin", "in": {}})

    kids = await _children(api, pid)
    assert sorted(ns for ns, _ in kids.values()) == ["fin/pay", "ops/desk", "ops/desk"]
    assert {status for _, status in kids.values()} == {"ACTIVE"}
    local = [k for k, (ns, _) in kids.items() if ns == "ops/desk"]
    (remote,) = [k for k, (ns, _) in kids.items() if ns == "fin/pay"]

    # Each child's end shows in the parent's view; the join completes the parent.
    await api.ok(ACT, {"i": remote, "a": "finish", "in": {"note": "paid"}})
    await api.ok(ACT, {"i": local[0], "a": "finish", "in": {"note": "hr ok"}})
    kids = await _children(api, pid)
    assert kids[remote] == ("fin/pay", "COMPLETED")
    assert kids[local[0]] == ("ops/desk", "COMPLETED")
    assert kids[local[1]] == ("ops/desk", "ACTIVE")

    # A viewer who may read both namespaces sees all three; one who may read only the
    # parent's namespace sees only the children there.
    _, both = await api.user("ops/desk", "viewer")
    await api.ok(
        'mutation($a:String!){grantRole(namespace:"fin/pay",actor:$a,roles:["viewer"]){namespace}}',
        {"a": (await _actor_of(api, both))},
    )
    assert set(await _children(api, pid, both)) == set(kids)
    _, desk_only = await api.user("ops/desk", "viewer")
    assert set(await _children(api, pid, desk_only)) == set(local)

    await api.ok(ACT, {"i": local[1], "a": "finish", "in": {"note": "it ok"}})
    body = await api.ok(CHILDREN, {"i": pid})
    assert body["instance"]["status"] == "COMPLETED"
    assert {e["node"]["status"] for e in body["instance"]["children"]["edges"]} == {"COMPLETED"}


async def _actor_of(api: Api, token: str) -> str:
    return str((await api.ok("{viewer{id}}", token=token))["viewer"]["id"])


GATED: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/gated",
    "initial": "review",
    "states": {
        "review": {
            "label": "Review",
            "form": {"fields": {"comment": {"type": "string", "required": True}}},
        },
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "approve": {"role": "approver", "from": "review", "to": "done"},
    },
}


async def test_no_applicable_action_names_the_missing_role(api: Api) -> None:
    await api.ok(DEPLOY, {"d": GATED})
    _, clerk = await api.user("ops/desk", "clerk")
    started = await api.ok(START, {"w": GATED["$path"], "d": {}}, token=clerk)
    pid = started["startInstance"]["instanceId"]
    body = await api.gql(
        "mutation($i:ID!,$in:JSON){advance(instance:$i,input:$in){instance{instanceId}}}",
        {"i": pid, "in": {"fields": {"comment": "ok"}}},
        token=clerk,
    )
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "NO_APPLICABLE_ACTION"
    assert (
        "you lack the role" in error["message"]
        and "'approve' needs 'approver'" in (error["message"])
    )
    assert error["extensions"]["details"]["missingRoles"] == {"approve": ["approver"]}


async def test_form_values_sent_flat_say_to_send_them_under_fields(api: Api) -> None:
    await api.ok(DEPLOY, {"d": GATED})
    _, approver = await api.user("ops/desk", "approver")
    started = await api.ok(START, {"w": GATED["$path"], "d": {}}, token=approver)
    pid = started["startInstance"]["instanceId"]
    flat = {"comment": "looks fine"}
    body = await api.gql(ACT, {"i": pid, "a": "approve", "in": flat}, token=approver)
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "INVALID_INPUT"
    assert "form values go under input.fields" in error["message"]
    assert "{\"fields\": {'comment': ...}}" in error["message"]


PUBLIC: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/web/request",
    "initial": "form",
    "states": {
        "form": {
            "label": "Your request",
            "audience": "public",
            "visible": ["name"],
            "form": {"fields": {"name": {"type": "string", "required": True}}},
        },
        "closed": {"label": "Closed", "terminal": True},
    },
    "actions": {
        "send": {"role": "public", "from": "form", "to": "closed",
                 "mutate": {"$set": {"name": "input.fields.name"}}},
        "save": {"role": "public", "from": "form", "when": "input.fields.name != 'x'",
                 "mutate": {"$set": {"name": "input.fields.name"}}},
    },
}  # fmt: skip
PUBLIC_START = 'mutation{startPublic(workflow:"ops/web/request"){token}}'
PUBLIC_ACT = (
    "mutation($t:String!,$a:String,$in:JSON){advancePublic(token:$t,action:$a,input:$in){status}}"
)


async def test_a_visitors_errors_never_show_the_uuid_or_say_process(api: Api) -> None:
    await api.ok(DEPLOY, {"d": PUBLIC})
    token = (await api.ok(PUBLIC_START, token=None))["startPublic"]["token"]
    found = await api.ok(
        'query{instances(filter:{workflow:"ops/web/request"}){edges{node{instanceId}}}}'
    )
    pid = found["instances"]["edges"][0]["node"]["instanceId"]
    bodies = [
        # form values sent flat
        await api.gql(PUBLIC_ACT, {"t": token, "a": "send", "in": {"name": "Ann"}}, token=None),
        # a guard that does not hold
        await api.gql(
            PUBLIC_ACT, {"t": token, "a": "save", "in": {"fields": {"name": "x"}}}, token=None
        ),
        # an action that does not exist
        await api.gql(PUBLIC_ACT, {"t": token, "a": "nope", "in": {}}, token=None),
    ]
    await api.gql(PUBLIC_ACT, {"t": token, "a": "send", "in": {"fields": {"name": "A"}}},
                  token=None)  # fmt: skip
    # the instance has ended
    bodies.append(
        await api.gql(
            PUBLIC_ACT, {"t": token, "a": "save", "in": {"fields": {"name": "B"}}}, token=None
        )
    )
    codes = [b["errors"][0]["extensions"]["code"] for b in bodies]
    assert codes == ["INVALID_INPUT", "GUARD_FAILED", "NOT_FOUND", "INACTIVE_PROCESS"], codes
    assert "under input.fields" in bodies[0]["errors"][0]["message"]
    for body in bodies:
        assert body.get("errors"), body
        text = json.dumps(body["errors"])
        assert pid not in text, text
        assert "process" not in text.lower().replace("inactive_process", ""), text
    assert "this form" in bodies[-1]["errors"][0]["message"]


ROUTED: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/routed",
    "initial": "draft",
    "states": {
        "draft": {"label": "Draft"},
        "big": {"label": "Big", "await": {"children": 2, "then": "joined"}},
        "small": {"label": "Small", "terminal": True},
    },
    "actions": {
        "submit": {
            "from": "draft",
            "to": [{"when": "input.amount > 100", "to": "big"}, {"to": "small"}],
            "spawn": [{"workflow": "ops/desk/task", "each": {"$ref": "input.teams"}}],
        },
        "joined": {"role": "system", "from": "big", "to": "$cancel"},
    },
}


async def test_a_workflows_actions_show_their_routes_and_multi_instance_spawns(api: Api) -> None:
    await api.ok(DEPLOY, {"d": LOCAL_TASK})
    await api.ok(DEPLOY, {"d": ROUTED})
    body = await api.ok('query{workflow(path:"ops/desk/routed"){actions{key to routes spawn}}}')
    actions = {a["key"]: a for a in body["workflow"]["actions"]}
    assert actions["submit"]["to"] is None
    assert actions["submit"]["routes"] == [
        {"when": "input.amount > 100", "to": "big"},
        {"when": None, "to": "small"},
    ]
    (spawn,) = actions["submit"]["spawn"]
    assert (spawn["workflow"], spawn["each"]) == ("ops/desk/task", {"$ref": "input.teams"})
    assert actions["joined"]["to"] == "$cancel"


TIMED: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/timed",
    "initial": "waiting",
    "idle_timeout": {"seconds": 3600, "action": "expire"},
    "states": {
        "waiting": {
            "label": "Waiting",
            "sla_seconds": 100,
            "sla_warning": 0.5,
            "sla_warning_notify": False,
            "timeout": {"seconds": {"$ref": "data.patience"}, "action": "escalate"},
            "assign": {"user": {"$ref": "data.owner"}},
        },
        "fanned": {"label": "Fanned", "await": {"children": 2, "then": "joined"}},
        "escalated": {"label": "Escalated", "sla_seconds": 60},
        "done": {"label": "Done", "terminal": True, "returns": ["verdict", "note"]},
    },
    "actions": {
        "escalate": {"role": "system", "from": "waiting", "to": "escalated"},
        "expire": {"role": "system", "to": "$cancel"},
        "fan": {"from": "waiting", "to": "fanned"},
        "joined": {"role": "system", "from": "fanned", "to": "done"},
        "close": {"from": "escalated", "to": "done"},
    },
}
STATE_21 = (
    "query($p:String!){workflow(path:$p){idleTimeout{action seconds reference expression} "
    "states{key slaWarning slaWarningNotifies assignUser returns onAdvance autoAssign "
    "retries{max backoffSeconds} timeout{action seconds reference expression} "
    "join{children count then}}}}"
)


async def test_a_states_21_fields_are_typed_in_the_graph(api: Api) -> None:
    """Timers, joins, returns, SLA warnings and person assignment are readable as typed
    fields, so a frontend need not parse the definition's JSON for them."""
    await api.ok(DEPLOY, {"d": TIMED})
    body = await api.ok(STATE_21, {"p": TIMED["$path"]})
    workflow = body["workflow"]
    assert workflow["idleTimeout"] == {
        "action": "expire", "seconds": 3600.0, "reference": None, "expression": None,
    }  # fmt: skip
    states = {s["key"]: s for s in workflow["states"]}
    waiting = states["waiting"]
    assert (waiting["slaWarning"], waiting["slaWarningNotifies"]) == (0.5, False)
    assert waiting["timeout"] == {
        "action": "escalate", "seconds": None, "reference": {"$ref": "data.patience"},
        "expression": None,
    }  # fmt: skip
    assert waiting["assignUser"] == {"$ref": "data.owner"}
    assert waiting["join"] is None
    assert states["fanned"]["join"] == {"children": "2", "count": 2, "then": "joined"}
    assert (states["escalated"]["slaWarning"], states["escalated"]["slaWarningNotifies"]) == (
        0.8,
        True,
    )
    done = states["done"]
    assert done["returns"] == ["verdict", "note"]
    assert (done["slaWarning"], done["timeout"], done["assignUser"], done["retries"]) == (
        None, None, None, None,
    )  # fmt: skip
