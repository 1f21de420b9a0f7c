"""The rest of the DESIGN §10 operations through the real app: cancelling instances and
assignments, unclaiming, entry tokens for started instances, modules, revoking roles,
removing workflows, breach notifications and the public-entry rate limit."""

from __future__ import annotations

import asyncio
from typing import Any

from graph_stack import Api, loan, open_stack
from test_graph_kernel import SIGNUP

from stateward.runtime.sweeps import sla

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
START = 'mutation{startInstance(workflow:"acme/loans/loan"){instanceId}}'
SUBMIT = """mutation($i:ID!){performAction(instance:$i,action:"submit",
  input:{fields:{amount:5}}){duplicate}}"""
QUEUE = """query($t:String!){assignments(team:$t){edges{node{assignmentId status}}}}"""
CANCEL = """mutation($i:ID!){cancelInstance(instance:$i,reason:"no longer needed"){
  duplicate event{action actor} instance{status terminal assignments{edges{node{status}}}}}}"""
CLAIM = "mutation($i:ID!){claimAssignment(id:$i){status assignee}}"
UNCLAIM = "mutation($i:ID!){unclaimAssignment(id:$i){status assignee}}"
CANCEL_ASSIGNMENT = "mutation($i:ID!){cancelAssignment(id:$i){status cancelledAt}}"
MODULE = """mutation($n:String!,$m:String!,$s:String!){%s(namespace:$n,name:$m,source:$s){
  modules{name version hash}}}"""
RULES_V1 = "def decide(ctx):\n    return {}\n"
RULES_V2 = "def decide(ctx):\n    return {'ok': True}\n"


def code(body: dict[str, Any]) -> str:
    """The `extensions.code` of the first error of a response."""
    return str(body["errors"][0]["extensions"]["code"])


async def _in_review(api: Api, definition: dict[str, Any] | None = None) -> str:
    await api.ok(DEPLOY, {"d": definition or loan()})
    pid = (await api.ok(START))["startInstance"]["instanceId"]
    await api.ok(SUBMIT, {"i": pid})
    return str(pid)


async def _assignment(api: Api, token: str) -> str:
    edges = (await api.ok(QUEUE, {"t": "analyst"}, token=token))["assignments"]["edges"]
    return str(edges[0]["node"]["assignmentId"])


async def test_cancelling_an_instance_ends_it_cancels_its_queue_and_cannot_repeat(
    api: Api,
) -> None:
    pid = await _in_review(api)
    done = (await api.ok(CANCEL, {"i": pid}))["cancelInstance"]
    assert done["duplicate"] is False
    assert done["event"] == {"action": "$cancel", "actor": api.admin.public}
    assert done["instance"]["status"] == "CANCELLED"
    edges = done["instance"]["assignments"]["edges"]
    assert [e["node"]["status"] for e in edges] == ["CANCELLED"]
    assert code(await api.gql(CANCEL, {"i": pid})) == "INACTIVE_PROCESS"


async def test_only_the_starter_or_an_admin_cancels_an_instance(api: Api) -> None:
    pid = await _in_review(api)
    _, analyst = await api.user("acme", "analyst")
    assert code(await api.gql(CANCEL, {"i": pid}, token=analyst)) == "FORBIDDEN"


async def test_an_assignee_unclaims_and_only_an_admin_cancels_an_assignment(api: Api) -> None:
    await _in_review(api)
    _, ann = await api.user("acme", "analyst")
    ident = await _assignment(api, ann)
    await api.ok(CLAIM, {"i": ident}, token=ann)
    _, bob = await api.user("acme", "analyst")
    assert code(await api.gql(UNCLAIM, {"i": ident}, token=bob)) == "FORBIDDEN"
    back = (await api.ok(UNCLAIM, {"i": ident}, token=ann))["unclaimAssignment"]
    assert back == {"status": "UNASSIGNED", "assignee": None}
    assert code(await api.gql(CANCEL_ASSIGNMENT, {"i": ident}, token=ann)) == "FORBIDDEN"
    cancelled = (await api.ok(CANCEL_ASSIGNMENT, {"i": ident}))["cancelAssignment"]
    assert cancelled["status"] == "CANCELLED" and cancelled["cancelledAt"]


async def test_an_entry_token_issued_for_a_started_instance_opens_its_public_view(
    api: Api,
) -> None:
    await api.ok(DEPLOY, {"d": SIGNUP})
    started = await api.ok('mutation{startInstance(workflow:"acme/web/signup"){instanceId}}')
    pid = started["startInstance"]["instanceId"]
    issue = "mutation($i:ID!){issueEntryToken(instance:$i)}"
    first = (await api.ok(issue, {"i": pid}))["issueEntryToken"]
    view = "query($t:String!){publicEntry(token:$t){state{key total} status}}"
    seen = await api.ok(view, {"t": first}, token=None)
    assert seen["publicEntry"] == {"state": {"key": "form", "total": 3}, "status": "ACTIVE"}
    second = (await api.ok(issue, {"i": pid}))["issueEntryToken"]
    assert second != first
    assert code(await api.gql(view, {"t": first}, token=None)) == "NOT_FOUND"
    _, outsider = await api.user("other", "analyst")
    assert code(await api.gql(issue, {"i": pid}, token=outsider)) in {"FORBIDDEN", "NOT_FOUND"}


async def test_modules_are_added_then_updated_as_new_versions(api: Api) -> None:
    args = {"n": "acme", "m": "rules", "s": RULES_V1}
    added = (await api.ok(MODULE % "addModule", args))["addModule"]["modules"]
    assert [(m["name"], m["version"]) for m in added] == [("rules", 1)]
    assert code(await api.gql(MODULE % "addModule", args)) == "CONFLICT"
    updated = await api.ok(MODULE % "updateModule", {**args, "s": RULES_V2})
    [module] = updated["updateModule"]["modules"]
    assert module["version"] == 2 and module["hash"] != added[0]["hash"]
    missing = await api.gql(MODULE % "updateModule", {**args, "m": "nowhere"})
    assert code(missing) == "NOT_FOUND"
    _, analyst = await api.user("acme", "analyst")
    assert code(await api.gql(MODULE % "addModule", {**args, "m": "x"}, token=analyst)) == (
        "FORBIDDEN"
    )


async def test_revoking_a_role_removes_the_member_and_its_reads(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    key, analyst = await api.user("acme", "analyst")
    listed = "{workflows{edges{node{path}}}}"
    assert (await api.ok(listed, token=analyst))["workflows"]["edges"]
    revoke = """mutation($a:String!){revokeRole(namespace:"acme",actor:$a,roles:["analyst"]){
      members{actor roles}}}"""
    members = (await api.ok(revoke, {"a": key.public}))["revokeRole"]["members"]
    assert key.public not in [m["actor"] for m in members]
    assert (await api.ok(listed, token=analyst))["workflows"]["edges"] == []


async def test_a_removed_workflow_is_no_longer_listed_or_startable(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    removed = await api.ok('mutation{removeWorkflow(path:"acme/loans/loan")}')
    assert removed == {"removeWorkflow": True}
    listed = await api.ok('{workflows(namespace:"acme/loans"){edges{node{path}}}}')
    assert listed["workflows"]["edges"] == []
    assert code(await api.gql(START)) == "NOT_FOUND"
    again = await api.gql('mutation{removeWorkflow(path:"acme/loans/loan")}')
    assert code(again) == "NOT_FOUND"


async def test_a_breach_notification_is_queryable_by_the_team(api: Api) -> None:
    quick = loan()
    quick["states"]["review"]["sla_seconds"] = 1
    quick["states"]["review"]["sla_warning_notify"] = False  # the warning's own: test_dsl21
    pid = await _in_review(api, quick)
    _, analyst = await api.user("acme", "analyst")
    _, clerk = await api.user("acme", "clerk")
    await asyncio.sleep(1.05)
    await sla.scan(api.runtime)  # the node's ticker may have fired it already: exactly once
    query = "{notifications{edges{node{recipient kind instanceId readAt}}}}"
    found = [e["node"] for e in (await api.ok(query, token=analyst))["notifications"]["edges"]]
    assert found == [
        {"recipient": "team:analyst", "kind": "SLA_BREACHED", "instanceId": pid,
         "readAt": None}
    ]  # fmt: skip
    assert (await api.ok(query, token=clerk))["notifications"]["edges"] == []
    # Read marks: only the addressee's (or its team's) unread ones change.
    ident = (await api.ok("{notifications{nodes{id}}}", token=analyst))["notifications"]
    mark = "mutation($i:[ID!]!){markNotificationsRead(ids:$i)}"
    ids = {"i": [ident["nodes"][0]["id"]]}
    assert (await api.ok("{unreadCount}", token=analyst)) == {"unreadCount": 1}
    assert (await api.ok(mark, ids, token=clerk)) == {"markNotificationsRead": 0}
    assert (await api.ok(mark, ids, token=analyst)) == {"markNotificationsRead": 1}
    assert (await api.ok(mark, ids, token=analyst)) == {"markNotificationsRead": 0}
    assert (await api.ok("{unreadCount}", token=analyst)) == {"unreadCount": 0}
    counted = "{notifications(unreadOnly:true){totalCount nodes{id}}}"
    assert (await api.ok(counted, token=analyst))["notifications"] == {
        "totalCount": 0, "nodes": []}  # fmt: skip
    assert (await api.ok("{notifications{totalCount}}", token=analyst))["notifications"] == {
        "totalCount": 1}  # fmt: skip
    bad = await api.gql('mutation{markNotificationsRead(ids:["x"])}', token=analyst)
    assert bad["errors"][0]["extensions"]["code"] == "INVALID_INPUT"


async def test_notifications_page_both_ways_as_mirror_images(api: Api) -> None:
    """`notifications(first, after, last, before)`, newest first (issue 16: every list
    pages backward): the backward walk is the forward one reversed."""
    _, analyst = await api.user("acme", "analyst")
    async with api.runtime.uow() as uow:
        for n in range(11):
            await uow.notifications.add(
                "team:analyst", "acme", "workflow.sla.warning", {"n": n}, api.runtime.clock.now()
            )
        await uow.commit()
    query = """query($first:Int,$after:String,$last:Int,$before:String){
      notifications(first:$first,after:$after,last:$last,before:$before){ totalCount
      nodes { payload } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }"""

    async def walk(backward: bool) -> tuple[list[int], int]:
        seen: list[int] = []
        pages, cursor = 0, None
        while True:
            paging = {"last": 4, "before": cursor} if backward else {"first": 4, "after": cursor}
            page = (await api.ok(query, paging, token=analyst))["notifications"]
            assert page["totalCount"] == 11
            pages += 1
            found = [node["payload"]["n"] for node in page["nodes"]]
            seen += found[::-1] if backward else found
            info = page["pageInfo"]
            if not (info["hasPreviousPage"] if backward else info["hasNextPage"]):
                return seen, pages
            cursor = info["startCursor"] if backward else info["endCursor"]

    forward, pages = await walk(False)
    backward, back_pages = await walk(True)
    assert forward == list(range(10, -1, -1))  # newest first
    assert backward[::-1] == forward and pages == back_pages == 3
    both = await api.gql("{notifications(first:1,last:1){totalCount}}", token=analyst)
    assert both["errors"][0]["extensions"]["code"] == "INVALID_INPUT"


async def test_public_calls_beyond_the_per_ip_limit_are_rate_limited(db_url: str) -> None:
    stack, close = await open_stack(db_url, public_rate_limit=2)
    try:
        await stack.ok(DEPLOY, {"d": SIGNUP})
        start = 'mutation{startPublic(workflow:"acme/web/signup"){token}}'
        token = (await stack.ok(start, token=None))["startPublic"]["token"]
        view = "query($t:String!){publicEntry(token:$t){status}}"
        await stack.ok(view, {"t": token}, token=None)
        limited = await stack.gql(view, {"t": token}, token=None)
        assert code(limited) == "RATE_LIMITED"
        assert code(await stack.gql(start, token=None)) == "RATE_LIMITED"
    finally:
        await close()
