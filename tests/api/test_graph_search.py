"""`instances(filter, orderBy, first, after, last, before)` through the real API: tenant
visibility, totalCount against the pages walked, backward pages mirroring forward ones,
and every bad input answered with a code and a pointer."""

from __future__ import annotations

from typing import Any

from graph_stack import Api, loan

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id version}}"
START = "mutation($w:String!){startInstance(workflow:$w){id instanceId}}"
SUBMIT = """mutation($i:ID!,$in:JSON){performAction(instance:$i,action:"submit",input:$in)
  { instance { id } }}"""
SEARCH = """query($f:InstanceFilter,$o:InstanceOrder,$first:Int,$after:String,$last:Int,
  $before:String){ instances(filter:$f,orderBy:$o,first:$first,after:$after,last:$last,
  before:$before){ totalCount edges { cursor node { instanceId namespace data } }
  pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }"""


async def _world(api: Api) -> dict[str, list[str]]:
    await api.ok(DEPLOY, {"d": loan("acme/loans/loan")})
    await api.ok(DEPLOY, {"d": loan("globex/loans/loan")})
    made: dict[str, list[str]] = {"acme": [], "globex": []}
    for n in range(26):
        tenant = "globex" if n % 5 == 0 else "acme"
        inst = (await api.ok(START, {"w": f"{tenant}/loans/loan"}))["startInstance"]
        await api.ok(SUBMIT, {"i": inst["id"], "in": {"fields": {"amount": 100 + n}}})
        made[tenant].append(inst["instanceId"])
    return made


async def _walk(api: Api, token: str, variables: dict[str, Any], backward: bool) -> Any:
    seen: list[dict[str, Any]] = []
    totals: set[int] = set()
    pages = 0
    cursor = None
    while True:
        paging = {"last": 4, "before": cursor} if backward else {"first": 4, "after": cursor}
        page = (await api.ok(SEARCH, {**variables, **paging}, token=token))["instances"]
        totals.add(page["totalCount"])
        pages += 1
        edges = page["edges"][::-1] if backward else page["edges"]
        seen += [e["node"] for e in edges]
        info = page["pageInfo"]
        more = info["hasPreviousPage"] if backward else info["hasNextPage"]
        if not more:
            return seen, pages, totals
        cursor = info["startCursor"] if backward else info["endCursor"]


async def test_a_tenant_searches_sorts_and_counts_only_its_own_instances(api: Api) -> None:
    made = await _world(api)
    _, analyst = await api.user("acme/loans", "analyst")
    variables = {
        "f": {"data": [{"path": "amount", "op": "GTE", "value": 105}], "status": ["ACTIVE"]},
        "o": {"field": "DATA", "path": "amount", "direction": "DESC"},
    }
    forward, pages, totals = await _walk(api, analyst, variables, backward=False)
    backward, _, _ = await _walk(api, analyst, variables, backward=True)
    assert {n["namespace"] for n in forward} == {"acme/loans"}
    amounts = [n["data"]["amount"] for n in forward]
    assert amounts == sorted(amounts, reverse=True) and min(amounts) >= 105
    assert len(forward) == len(made["acme"]) - 4 == 4 * pages  # 4 full pages
    assert totals == {len(forward)}
    assert backward == forward[::-1]
    admin_sees = (await api.ok(SEARCH, {"f": {}, "first": 100}))["instances"]["totalCount"]
    assert admin_sees == 26
    hidden = await api.gql(SEARCH, {"f": {"namespace": "globex/loans"}}, token=analyst)
    assert hidden["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    by_workflow = await api.gql(SEARCH, {"f": {"workflow": "globex/loans/loan"}}, token=analyst)
    assert by_workflow["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    _, outsider = await api.user("initech/ops", "analyst")
    nothing = (await api.ok(SEARCH, {"first": 5}, token=outsider))["instances"]
    assert nothing["edges"] == [] and nothing["totalCount"] == 0
    anonymous = await api.gql(SEARCH, {"first": 5}, token=None)
    assert anonymous["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_filters_on_columns_and_parent_ids_accept_node_ids(api: Api) -> None:
    made = await _world(api)
    in_review = await api.ok(
        SEARCH, {"f": {"workflow": "acme/loans/loan", "state": "review", "stale": False,
                       "createdAfter": "2000-01-01T00:00:00Z"}, "first": 100},
    )  # fmt: skip
    assert [e["node"]["instanceId"] for e in in_review["instances"]["edges"]] == made["acme"]
    none = await api.ok(SEARCH, {"f": {"slaBreached": True, "team": "nobody"}})
    assert none["instances"]["totalCount"] == 0
    node_id = (await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]["id"]
    children = await api.ok(SEARCH, {"f": {"parent": node_id}})
    assert children["instances"]["edges"] == []


async def test_bad_search_input_is_invalid_input_at_a_pointer(api: Api) -> None:
    await _world(api)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"f": {"data": [{"path": "a..b", "op": "EQ", "value": 1}]}}, "/filter/data/0/path"),
        ({"f": {"data": [{"path": "a", "op": "GT", "value": [1]}]}}, "/filter/data/0/value"),
        ({"f": {"data": [{"path": "a", "op": "IN", "value": []}]}}, "/filter/data/0/value"),
        ({"o": {"field": "DATA"}}, "/orderBy/path"),
        ({"o": {"field": "CREATED", "path": "a"}}, "/orderBy/path"),
        ({"first": 2, "last": 2}, "/last"),
        ({"after": "x", "before": "y"}, "/before"),
        ({"last": 101}, "/last"),
        ({"before": "not-a-cursor"}, "/before"),
    ]
    for variables, pointer in cases:
        body = await api.gql(SEARCH, variables)
        error = body["errors"][0]["extensions"]
        assert (error["code"], error.get("pointer")) == ("INVALID_INPUT", pointer), variables
    page = (await api.ok(SEARCH, {"first": 1}))["instances"]["pageInfo"]["endCursor"]
    reused = await api.gql(SEARCH, {"o": {"field": "UPDATED"}, "after": page})
    assert reused["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    string_status = await api.gql('{instances(filter:{status:"active"}){totalCount}}')
    assert string_status["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"


async def test_counts_group_visible_rows_in_sql(api: Api) -> None:
    made = await _world(api)
    _, analyst = await api.user("acme/loans", "analyst")
    query = """query($g:[InstanceGroup!]!,$f:InstanceFilter){instanceCounts(groupBy:$g,
      filter:$f){workflow state status count}}"""
    mine = await api.ok(query, {"g": ["WORKFLOW", "STATUS"]}, token=analyst)
    assert mine["instanceCounts"] == [{"workflow": "acme/loans/loan", "state": None,
                                       "status": "ACTIVE", "count": len(made["acme"])}]  # fmt: skip
    everything = await api.ok(query, {"g": ["WORKFLOW"], "f": {"state": "review"}})
    assert [(r["workflow"], r["count"]) for r in everything["instanceCounts"]] == [
        ("acme/loans/loan", 20), ("globex/loans/loan", 6)]  # fmt: skip
    filtered = await api.ok(
        query, {"g": ["STATE"], "f": {"data": [{"path": "amount", "op": "LT", "value": 103}]}},
        token=analyst,
    )  # fmt: skip
    assert filtered["instanceCounts"] == [
        {"workflow": None, "state": "review", "status": None, "count": 2}]  # fmt: skip
    twice = await api.gql(query, {"g": ["STATE", "STATE"]})
    assert twice["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    queues = """query($f:AssignmentFilter){assignmentCounts(groupBy:[TEAM,STATUS],filter:$f){
      team status assignee count}}"""
    counted = await api.ok(queues, {}, token=analyst)
    assert counted["assignmentCounts"] == [
        {"team": "analyst", "status": "UNASSIGNED", "assignee": None, "count": 20}]  # fmt: skip
    all_open = await api.ok(queues, {"f": {"status": ["UNASSIGNED", "CLAIMED"]}})
    assert all_open["assignmentCounts"][0]["count"] == 26
    hidden = await api.gql(queues, {"f": {"namespace": "globex/loans"}}, token=analyst)
    assert hidden["errors"][0]["extensions"]["code"] == "NOT_FOUND"


AUDIT = """query($f:AuditFilter,$o:AuditOrder,$first:Int,$after:String,$last:Int,
  $before:String){ auditLog(filter:$f,orderBy:$o,first:$first,after:$after,last:$last,
  before:$before){ totalCount nodes { processId seq action workflow actor recordedAt }
  pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }"""


async def _audit_walk(api: Api, token: str, variables: dict[str, Any], backward: bool) -> Any:
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        paging = {"last": 10, "before": cursor} if backward else {"first": 10, "after": cursor}
        page = (await api.ok(AUDIT, {**variables, **paging}, token=token))["auditLog"]
        seen += page["nodes"][::-1] if backward else page["nodes"]
        info = page["pageInfo"]
        if not (info["hasPreviousPage"] if backward else info["hasNextPage"]):
            return seen, page["totalCount"]
        cursor = info["startCursor"] if backward else info["endCursor"]


async def test_the_audit_log_pages_a_tenants_events_newest_first(api: Api) -> None:
    made = await _world(api)
    _, analyst = await api.user("acme/loans", "analyst")
    wanted = {"f": {"workflow": "acme/loans/loan"}}
    events, total = await _audit_walk(api, analyst, wanted, backward=False)
    backward, _ = await _audit_walk(api, analyst, wanted, backward=True)
    assert total == len(events) == 2 * len(made["acme"])
    assert backward == events[::-1]
    times = [e["recordedAt"] for e in events]
    assert times == sorted(times, reverse=True)
    assert {e["action"] for e in events} == {"$start", "submit"}
    everything, _ = await _audit_walk(api, analyst, {}, backward=False)
    assert not any(e["workflow"].startswith("globex/") for e in everything)
    oldest = await api.ok(AUDIT, {"o": {"direction": "ASC"}, "first": 1, **wanted},
                          token=analyst)  # fmt: skip
    assert oldest["auditLog"]["nodes"][0] == events[-1]
    submits = await api.ok(AUDIT, {"f": {"action": "submit", "actor": api.admin.public,
                                         "from": events[-1]["recordedAt"]}})  # fmt: skip
    assert submits["auditLog"]["totalCount"] == 25  # all but globex n=0, before acme's first
    none = await api.ok(AUDIT, {"f": {"to": "2000-01-01T00:00:00Z"}})
    assert none["auditLog"]["totalCount"] == 0
    hidden = await api.gql(AUDIT, {"f": {"namespace": "globex/loans"}}, token=analyst)
    assert hidden["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    reused = await api.gql(AUDIT, {"o": {"direction": "ASC"}, "after": (await api.ok(
        AUDIT, {"first": 1}))["auditLog"]["pageInfo"]["endCursor"]})  # fmt: skip
    assert reused["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
