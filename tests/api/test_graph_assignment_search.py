"""`assignments(filter, orderBy, first, after, last, before)` and task fields (issue 16)
through the real API: candidates, priority and dates from the state's `assign` object,
the team-queue visibility rule across tenants, both paging directions against
`totalCount`, claims by candidacy, `myAssignments`, and bad input with codes and pointers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from graph_stack import Api, loan

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id version}}"
START = "mutation($w:String!){startInstance(workflow:$w){id instanceId}}"
SUBMIT = """mutation($i:ID!,$in:JSON){performAction(instance:$i,action:"submit",input:$in)
  { instance { id } }}"""
SEARCH = """query($f:AssignmentFilter,$o:AssignmentOrder,$first:Int,$after:String,$last:Int,
  $before:String){ assignments(filter:$f,orderBy:$o,first:$first,after:$after,last:$last,
  before:$before){ totalCount edges { cursor node { assignmentId team status priority
  dueAt followUpAt candidateUsers instance { namespace data } } }
  pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }"""
CLAIM = "mutation($a:ID!){claimAssignment(id:$a){status assignee}}"
MINE = "{myAssignments(first:100){totalCount edges{node{assignmentId status}}}}"


def task(path: str, candidate: str) -> dict[str, Any]:
    """The loan workflow whose review is a task: a candidate, priority = amount, due in an
    hour, follow-up after ten minutes."""
    value = loan(path)
    value["states"]["review"]["assign"] = {
        "team": "analyst", "candidates": [candidate], "priority": {"$ref": "data.amount"},
        "due": 3600, "followUp": 600,
    }  # fmt: skip
    return value


async def _world(api: Api, candidate: str) -> dict[str, list[str]]:
    await api.ok(DEPLOY, {"d": task("acme/loans/loan", candidate)})
    await api.ok(DEPLOY, {"d": task("globex/loans/loan", candidate)})
    made: dict[str, list[str]] = {"acme": [], "globex": []}
    for n in range(16):
        tenant = "globex" if n % 4 == 0 else "acme"
        inst = (await api.ok(START, {"w": f"{tenant}/loans/loan"}))["startInstance"]
        await api.ok(SUBMIT, {"i": inst["id"], "in": {"fields": {"amount": 100 + n}}})
        made[tenant].append(inst["instanceId"])
    return made


async def _walk(api: Api, token: str, variables: dict[str, Any], backward: bool) -> Any:
    seen: list[dict[str, Any]] = []
    totals: set[int] = set()
    pages, cursor = 0, None
    while True:
        paging = {"last": 5, "before": cursor} if backward else {"first": 5, "after": cursor}
        page = (await api.ok(SEARCH, {**variables, **paging}, token=token))["assignments"]
        totals.add(page["totalCount"])
        pages += 1
        seen += [e["node"] for e in (page["edges"][::-1] if backward else page["edges"])]
        info = page["pageInfo"]
        if not (info["hasPreviousPage"] if backward else info["hasNextPage"]):
            return seen, pages, totals
        cursor = info["startCursor"] if backward else info["endCursor"]


async def test_a_team_member_filters_sorts_and_pages_its_tenants_tasks(api: Api) -> None:
    carol, _ = await api.user("acme/loans", "clerk")
    made = await _world(api, carol.public)
    _, analyst = await api.user("acme/loans", "analyst")
    order = {"field": "PRIORITY", "direction": "DESC"}
    forward, pages, totals = await _walk(api, analyst, {"o": order}, backward=False)
    backward, _, _ = await _walk(api, analyst, {"o": order}, backward=True)
    assert len(forward) == len(made["acme"]) == 12 and pages == 3 and totals == {12}
    assert backward == forward[::-1]
    assert {n["instance"]["namespace"] for n in forward} == {"acme/loans"}
    priorities = [n["priority"] for n in forward]
    assert priorities == sorted(priorities, reverse=True)
    assert priorities == [n["instance"]["data"]["amount"] for n in forward]
    first = forward[0]
    assert first["candidateUsers"] == [carol.public] and first["status"] == "UNASSIGNED"
    due = datetime.fromisoformat(first["dueAt"])
    follow = datetime.fromisoformat(first["followUpAt"])
    assert due - follow == timedelta(seconds=3000)
    by_due, _, _ = await _walk(api, analyst, {"o": {"field": "DUE"}}, backward=False)
    dues = [n["dueAt"] for n in by_due]
    assert dues == sorted(dues) and len(dues) == 12

    async def count(f: dict[str, Any], token: str = analyst) -> int:
        page = (await api.ok(SEARCH, {"f": f, "first": 0}, token=token))["assignments"]
        return int(page["totalCount"])

    assert await count({"priority": 110}) == sum(1 for p in priorities if p >= 110)
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert await count({"dueBefore": later}) == 12
    assert await count({"dueBefore": "2000-01-01T00:00:00+00:00"}) == 0
    assert await count({"team": "analyst", "status": ["UNASSIGNED"]}) == 12
    assert await count({"status": ["CLAIMED"]}) == 0
    assert await count({"candidate": carol.public}) == 12
    assert await count({"namespace": "globex/loans"}) == 0  # another tenant: nothing
    assert await count({"instance": made["globex"][0]}) == 0
    assert await count({}, token="admin") == 16
    _, outsider = await api.user("initech/ops", "analyst")
    assert await count({}, token=outsider) == 0
    _, clerk = await api.user("acme/loans", "clerk")  # reads acme, not the analyst queue
    assert await count({}, token=clerk) == 0
    legacy = await api.ok('{assignments(team:"analyst",status:UNASSIGNED){totalCount}}',
                          token=analyst)  # fmt: skip
    assert legacy["assignments"]["totalCount"] == 12


async def test_a_candidate_sees_claims_and_finds_its_tasks_in_my_assignments(api: Api) -> None:
    carol, carol_token = await api.user("acme/loans", "clerk")
    await _world(api, carol.public)
    mine = (await api.ok(MINE, token=carol_token))["myAssignments"]
    assert mine["totalCount"] == 12  # unassigned candidacies in acme (globex: no grant)
    visible = (await api.ok(SEARCH, {"first": 100}, token=carol_token))["assignments"]
    assert visible["totalCount"] == 12
    target = visible["edges"][0]["node"]["assignmentId"]
    claimed = (await api.ok(CLAIM, {"a": target}, token=carol_token))["claimAssignment"]
    assert claimed == {"status": "CLAIMED", "assignee": carol.public}
    _, dave = await api.user("acme/loans", "clerk")
    other = visible["edges"][1]["node"]["assignmentId"]
    refused = await api.gql(CLAIM, {"a": other}, token=dave)
    assert refused["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    mine = (await api.ok(MINE, token=carol_token))["myAssignments"]
    assert mine["totalCount"] == 12  # the claimed one, and 11 still-open candidacies
    _, analyst = await api.user("acme/loans", "analyst")
    await api.ok(CLAIM, {"a": other}, token=analyst)  # someone else's claim: no longer hers
    mine = (await api.ok(MINE, token=carol_token))["myAssignments"]
    assert mine["totalCount"] == 11


async def test_bad_assignment_search_input_is_invalid_input_at_a_pointer(api: Api) -> None:
    carol, _ = await api.user("acme/loans", "clerk")
    await _world(api, carol.public)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"first": 1000}, "/first"),
        ({"first": -1}, "/first"),
        ({"last": 101}, "/last"),
        ({"first": 2, "last": 2}, "/last"),
        ({"after": "not-a-cursor"}, "/after"),
        ({"before": "bm90LWpzb24"}, "/before"),
    ]
    for variables, pointer in cases:
        error = (await api.gql(SEARCH, variables))["errors"][0]["extensions"]
        assert (error["code"], error.get("pointer")) == ("INVALID_INPUT", pointer), variables
    end = (await api.ok(SEARCH, {"first": 1}))["assignments"]["pageInfo"]["endCursor"]
    reused = await api.gql(SEARCH, {"o": {"field": "PRIORITY"}, "after": end})
    assert reused["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    twice = await api.gql('{assignments(team:"analyst",filter:{team:"analyst"}){totalCount}}')
    assert twice["errors"][0]["extensions"]["pointer"] == "/team"
    string_status = await api.gql('{assignments(filter:{status:"claimed"}){totalCount}}')
    assert string_status["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"


async def test_a_malformed_task_is_an_invalid_definition_with_pointers(api: Api) -> None:
    bad = loan()
    bad["states"]["review"]["assign"] = {
        "team": "analyst", "candidates": "alice", "priority": 1.5, "due": -1, "color": "red",
    }  # fmt: skip
    error = (await api.gql(DEPLOY, {"d": bad}))["errors"][0]
    assert error["extensions"]["code"] == "INVALID_DEFINITION"
    pointers = {p["pointer"] for p in error["extensions"]["problems"]}
    base = "/states/review/assign"
    assert {f"{base}/{k}" for k in ("candidates", "priority", "due", "color")} <= pointers


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def test_task_fields_computed_by_expressions_at_state_entry(api: Api) -> None:
    """`priority`, `due` and `followUp` as value expressions over the data after the
    entering event (issue 16), on both databases; what does not fit is null, not an error."""
    value = loan()
    value["states"]["intake"]["form"]["fields"]["deadline"] = {"type": "string"}
    value["actions"]["submit"]["mutate"]["$set"]["deadline"] = "input.fields.deadline"
    value["states"]["review"]["assign"] = {
        "team": "analyst",
        "priority": "CASE WHEN amount >= 1000 THEN 90 WHEN amount >= 100 THEN amount / 10 "
        "ELSE 5 END",
        "due": "CASE WHEN deadline IS NOT NULL THEN deadline - 3600 ELSE 86400 END",
        "followUp": "amount * 60",
    }
    await api.ok(DEPLOY, {"d": value})
    rows = [
        ({"amount": 5000, "deadline": "2027-01-10T12:00:00+02:00"}, 90),
        ({"amount": 455}, 45),
        ({"amount": 7, "deadline": "not a date"}, 5),
    ]
    for fields, _ in rows:
        inst = (await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]
        await api.ok(SUBMIT, {"i": inst["id"], "in": {"fields": fields}})
    query = """{assignments(orderBy:{field:PRIORITY,direction:DESC},first:10){edges{node{
      priority dueAt followUpAt createdAt instance { data } }}}}"""
    nodes = [e["node"] for e in (await api.ok(query))["assignments"]["edges"]]
    assert [n["priority"] for n in nodes] == [90, 45, 5]
    big, mid, small = nodes
    assert _parse(big["dueAt"]) == datetime(2027, 1, 10, 9, 0, tzinfo=UTC)
    assert _parse(mid["dueAt"]) == _parse(mid["createdAt"]) + timedelta(days=1)
    assert small["dueAt"] is None  # "not a date" minus seconds: null, the task still opened
    for node in nodes:
        amount = node["instance"]["data"]["amount"]
        want = _parse(node["createdAt"]) + timedelta(seconds=amount * 60)
        assert _parse(node["followUpAt"]) == want


async def test_a_bad_task_expression_is_an_invalid_definition_at_its_pointer(api: Api) -> None:
    bad = loan()
    bad["states"]["review"]["assign"] = {
        "team": "analyst", "priority": "amount >", "due": "input.when", "followUp": "'soon'",
    }  # fmt: skip
    error = (await api.gql(DEPLOY, {"d": bad}))["errors"][0]
    assert error["extensions"]["code"] == "INVALID_DEFINITION"
    found = {(p["code"], p["pointer"]) for p in error["extensions"]["problems"]}
    base = "/states/review/assign"
    assert found >= {
        ("INVALID_EXPRESSION", f"{base}/priority"),
        ("INVALID_EXPRESSION", f"{base}/due"),
        ("INVALID_FIELD", f"{base}/followUp"),
    }
    messages = " ".join(p["message"] for p in error["extensions"]["problems"])
    assert "at position 7" in messages and "CASE WHEN" in messages
    assert "instance data only" in messages


async def test_my_assignments_page_both_ways_as_mirror_images(api: Api) -> None:
    """`myAssignments(first, after, last, before)` (issue 16: every list pages backward):
    the backward walk is the forward one reversed, and both hold `totalCount` rows."""
    carol, carol_token = await api.user("acme/loans", "clerk")
    await _world(api, carol.public)
    page_query = """query($first:Int,$after:String,$last:Int,$before:String){
      myAssignments(first:$first,after:$after,last:$last,before:$before){ totalCount
      edges { node { assignmentId } } pageInfo { hasNextPage hasPreviousPage
      startCursor endCursor } } }"""

    async def walk(backward: bool) -> tuple[list[str], int, set[int]]:
        ids: list[str] = []
        totals: set[int] = set()
        pages, cursor = 0, None
        while True:
            paging = {"last": 5, "before": cursor} if backward else {"first": 5, "after": cursor}
            page = (await api.ok(page_query, paging, token=carol_token))["myAssignments"]
            totals.add(page["totalCount"])
            pages += 1
            found = [e["node"]["assignmentId"] for e in page["edges"]]
            ids += found[::-1] if backward else found
            info = page["pageInfo"]
            if not (info["hasPreviousPage"] if backward else info["hasNextPage"]):
                return ids, pages, totals
            cursor = info["startCursor"] if backward else info["endCursor"]

    forward, pages, totals = await walk(False)
    backward, back_pages, back_totals = await walk(True)
    assert totals == back_totals == {12} and len(set(forward)) == 12
    assert pages == back_pages == 3 and backward[::-1] == forward
    both = await api.gql("{myAssignments(first:1,last:1){totalCount}}", token=carol_token)
    assert both["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    bad = await api.gql('{myAssignments(after:"bm9wZQ"){totalCount}}', token=carol_token)
    assert bad["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
