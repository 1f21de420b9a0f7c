"""Kernel operations through the API: review queues, assignments and public entry."""

from __future__ import annotations

from typing import Any

from graph_stack import Api, loan

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
QUEUE = """query($t:String!){assignments(filter:{team:$t,status:[UNASSIGNED]}){
  edges{node{id assignmentId team status state instance{instanceId}}}}}"""
SIGNUP: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/web/signup",
    "initial": "form",
    "states": {
        "form": {"label": "Your details", "audience": "public", "visible": ["name"],
                 "form": {"fields": {"name": {"type": "string", "required": True}}}},
        "check": {"label": "Check", "visible": ["name"]},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "send": {"from": "form", "to": "check", "mutate": {"$set": {"name": "input.fields.name"}}},
        "finish": {"role": "admin", "from": "check", "to": "done"},
    },
}  # fmt: skip


async def _in_review(api: Api) -> str:
    await api.ok(DEPLOY, {"d": loan()})
    inst = await api.ok('mutation{startInstance(workflow:"acme/loans/loan"){id}}')
    pid = inst["startInstance"]["id"]
    await api.ok("mutation($i:ID!){performAction(instance:$i,action:\"submit\","
                 "input:{fields:{amount:5}}){duplicate}}", {"i": pid})  # fmt: skip
    return str(pid)


async def test_an_analyst_claims_from_the_team_queue_and_a_second_claim_loses(api: Api) -> None:
    await _in_review(api)
    ann_key, ann = await api.user("acme", "analyst")
    _, bob = await api.user("acme", "analyst")
    queue = (await api.ok(QUEUE, {"t": "analyst"}, token=ann))["assignments"]["edges"]
    assert len(queue) == 1 and queue[0]["node"]["state"] == "review"
    ident = queue[0]["node"]["id"]
    claim = "mutation($i:ID!){claimAssignment(id:$i){status assignee}}"
    claimed = (await api.ok(claim, {"i": ident}, token=ann))["claimAssignment"]
    assert claimed == {"status": "CLAIMED", "assignee": ann_key.public}
    lost = await api.gql(claim, {"i": ident}, token=bob)
    assert lost["errors"][0]["extensions"]["code"] == "ALREADY_CLAIMED"
    mine = await api.ok("{myAssignments{totalCount edges{node{assignmentId status}}}}", token=ann)
    assert [e["node"]["status"] for e in mine["myAssignments"]["edges"]] == ["CLAIMED"]
    assert mine["myAssignments"]["totalCount"] == 1
    counted = '{assignments(team:"analyst"){totalCount} open:assignments(team:"analyst",'
    counted += "status:UNASSIGNED){totalCount}}"
    assert await api.ok(counted, token=bob) == {"assignments": {"totalCount": 1},
                                                "open": {"totalCount": 0}}  # fmt: skip


async def test_completing_an_assignment_records_the_review_and_performs_the_action(
    api: Api,
) -> None:
    pid = await _in_review(api)
    _, boss = await api.user("acme", "analyst", "manager")
    queue = (await api.ok(QUEUE, {"t": "analyst"}, token=boss))["assignments"]["edges"]
    ident = queue[0]["node"]["assignmentId"]
    await api.ok("mutation($i:ID!){claimAssignment(id:$i){status}}", {"i": ident}, token=boss)
    done = await api.ok(
        "mutation($i:ID!){completeAssignment(id:$i,reviewData:{ok:true},action:\"approve\")"
        "{status reviewData instance{status state{key}}}}",
        {"i": ident}, token=boss,
    )  # fmt: skip
    result = done["completeAssignment"]
    assert result["status"] == "COMPLETED" and result["reviewData"] == {"ok": True}
    assert result["instance"] == {"status": "COMPLETED", "state": {"key": "approved"}}
    inst = await api.ok("query($i:ID!){instance(id:$i){terminal}}", {"i": pid}, token=boss)
    assert inst["instance"]["terminal"] is True


async def test_completing_an_assignment_passes_the_actions_input(api: Api) -> None:
    pid = await _in_review(api)
    _, boss = await api.user("acme", "analyst", "manager")
    queue = (await api.ok(QUEUE, {"t": "analyst"}, token=boss))["assignments"]["edges"]
    ident = queue[0]["node"]["id"]
    await api.ok("mutation($i:ID!){claimAssignment(id:$i){status}}", {"i": ident}, token=boss)
    complete = """mutation($i:ID!,$in:JSON){completeAssignment(id:$i,reviewData:{ok:1},
      action:"note",input:$in){status}}"""
    bad = await api.gql(complete, {"i": ident, "in": [1]}, token=boss)
    assert bad["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    done = await api.ok(complete, {"i": ident, "in": {"text": "looks fine"}}, token=boss)
    assert done["completeAssignment"]["status"] == "COMPLETED"
    inst = await api.ok("query($i:ID!){instance(id:$i){data}}", {"i": pid}, token=boss)
    assert inst["instance"]["data"]["notes"] == ["looks fine"]


async def test_a_visitor_starts_and_advances_a_public_workflow(api: Api) -> None:
    await api.ok(DEPLOY, {"d": SIGNUP})
    entry = await api.ok(
        "mutation{startPublic(workflow:\"acme/web/signup\"){token view{state{key ordinal total}"
        " active form}}}", token=None,
    )  # fmt: skip
    token = entry["startPublic"]["token"]
    assert entry["startPublic"]["view"]["state"] == {"key": "form", "ordinal": 0, "total": 3}
    assert entry["startPublic"]["view"]["active"] is True
    view = await api.ok(
        "mutation($t:String!){advancePublic(token:$t,action:\"send\",input:{fields:{name:\"Ann\"}})"
        "{state{key} data active}}", {"t": token}, token=None,
    )  # fmt: skip
    # `check` is a team state: the visitor's view stays on the public step, "processing"
    assert view["advancePublic"] == {"state": {"key": "form"}, "data": {}, "active": False}
    seen = await api.ok("query($t:String!){publicEntry(token:$t){state{key} status}}",
                        {"t": token}, token=None)  # fmt: skip
    assert seen["publicEntry"] == {"state": {"key": "form"}, "status": "PROCESSING"}
    unknown = await api.gql('{publicEntry(token:"nope"){status}}', token=None)
    assert unknown["errors"][0]["extensions"]["code"] == "NOT_FOUND"


async def test_a_team_queue_is_refused_to_non_members(api: Api) -> None:
    await _in_review(api)
    _, outsider = await api.user("acme", "clerk")
    body = await api.gql(QUEUE, {"t": "analyst"}, token=outsider)
    edges = body.get("data", {}) and body["data"]["assignments"]["edges"]
    assert body.get("errors") or edges == []
