"""Reads: namespace limits, node(id) for every node type, availableActions, paging."""

from __future__ import annotations

from typing import Any

from graph_stack import Api, loan

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id version}}"
START = "mutation($w:String!){startInstance(workflow:$w){id instanceId}}"
PERFORM = """mutation($i:ID!,$a:String!,$in:JSON){performAction(instance:$i,action:$a,input:$in)
  { event { id seq } instance { id } }}"""


async def _submitted(api: Api, path: str = "acme/loans/loan") -> dict[str, Any]:
    inst = (await api.ok(START, {"w": path}))["startInstance"]
    done = await api.ok(PERFORM, {"i": inst["id"], "a": "submit", "in": {"fields": {"amount": 7}}})
    return {**inst, "event": done["performAction"]["event"]}


async def test_reads_are_limited_to_namespaces_where_the_viewer_has_a_role(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan("acme/loans/loan")})
    await api.ok(DEPLOY, {"d": loan("globex/loans/loan")})
    acme = await _submitted(api, "acme/loans/loan")
    globex = await _submitted(api, "globex/loans/loan")
    _, token = await api.user("acme", "analyst")
    listed = await api.ok("{instances{edges{node{instanceId namespace}}}}", token=token)
    assert [e["node"]["instanceId"] for e in listed["instances"]["edges"]] == [acme["instanceId"]]
    everything = await api.ok("{instances{edges{node{instanceId}}}}")
    assert len(everything["instances"]["edges"]) == 2
    hidden = await api.gql("query($i:ID!){instance(id:$i){id}}",
                           {"i": globex["instanceId"]}, token=token)  # fmt: skip
    assert hidden["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    spaces = await api.ok("{namespaces}", token=token)
    assert "globex/loans" not in spaces["namespaces"] and "acme/loans" in spaces["namespaces"]
    wfs = await api.ok("{workflows{edges{node{path}}}}", token=token)
    assert [e["node"]["path"] for e in wfs["workflows"]["edges"]] == ["acme/loans/loan"]
    denied = await api.gql('{workflow(path:"globex/loans/loan"){path}}', token=token)
    assert denied["errors"][0]["extensions"]["code"] == "NOT_FOUND"


async def test_node_refetches_every_node_type(api: Api) -> None:
    wf = (await api.ok(DEPLOY, {"d": loan()}))["addWorkflow"]
    inst = await _submitted(api)
    data = await api.ok(
        """query($i:ID!){ instance(id:$i) {
             state { id } workflow { id actions { id } }
             assignments { edges { node { id } } } }
           registry(namespace:"acme/loans") { id } }""",
        {"i": inst["instanceId"]},
    )
    node_ids = {
        "Workflow": wf["id"],
        "Instance": inst["id"],
        "Event": inst["event"]["id"],
        "State": data["instance"]["state"]["id"],
        "Action": data["instance"]["workflow"]["actions"][0]["id"],
        "Assignment": data["instance"]["assignments"]["edges"][0]["node"]["id"],
        "Registry": data["registry"]["id"],
    }
    for type_name, ident in node_ids.items():
        found = await api.ok("query($id:ID!){node(id:$id){__typename id}}", {"id": ident})
        assert found["node"] == {"__typename": type_name, "id": ident}, type_name


async def test_instance_and_uuid_ids_are_interchangeable(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    inst = await _submitted(api)
    by_uuid = await api.ok("query($i:ID!){instance(id:$i){id}}", {"i": inst["instanceId"]})
    by_node = await api.ok("query($i:ID!){instance(id:$i){instanceId}}", {"i": inst["id"]})
    assert by_uuid["instance"]["id"] == inst["id"]
    assert by_node["instance"]["instanceId"] == inst["instanceId"]


async def test_available_actions_follow_role_state_and_guard(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    inst = await _submitted(api)
    query = "query($i:ID!){instance(id:$i){availableActions{key}}}"
    _, analyst = await api.user("acme", "analyst")
    _, manager = await api.user("acme", "manager")
    keys = lambda d: [a["key"] for a in d["instance"]["availableActions"]]  # noqa: E731
    assert keys(await api.ok(query, {"i": inst["id"]}, token=analyst)) == ["note"]
    assert keys(await api.ok(query, {"i": inst["id"]}, token=manager)) == [
        "approve", "reject", "note"]  # fmt: skip
    big = (await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]
    await api.ok(PERFORM, {"i": big["id"], "a": "submit", "in": {"fields": {"amount": 5000}}})
    assert keys(await api.ok(query, {"i": big["id"]}, token=manager)) == ["reject", "note"]


async def test_connections_page_with_first_and_after(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    ids = [(await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]["id"] for _ in range(5)]
    query = """query($a:String){instances(first:2,after:$a){
      edges{cursor node{id}} pageInfo{hasNextPage endCursor}}}"""
    seen: list[str] = []
    after = None
    while True:
        page = (await api.ok(query, {"a": after}))["instances"]
        seen += [e["node"]["id"] for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert seen == ids
    bad = await api.gql("{instances(first:1000){edges{cursor}}}")
    assert bad["errors"][0]["extensions"]["code"] == "INVALID_INPUT"


async def test_a_workflow_shows_versions_and_its_instances(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    changed = loan()
    changed["$description"] = "v2"
    await api.ok("mutation($d:JSON!){updateWorkflow(definition:$d){version}}", {"d": changed})
    await _submitted(api)
    data = await api.ok("""{ workflow(path:"acme/loans/loan") { version description
      versions { edges { node { version description } } }
      instances { edges { node { version state { key } } } } } }""")
    wf = data["workflow"]
    assert wf["version"] == 2 and wf["description"] == "v2"
    assert [e["node"]["version"] for e in wf["versions"]["edges"]] == [1, 2]
    assert wf["instances"]["edges"][0]["node"] == {"version": 2, "state": {"key": "review"}}
    v1 = await api.ok('{ workflow(path:"acme/loans/loan", version:1) { description } }')
    assert v1["workflow"]["description"] == "A small loan"


async def test_verify_process_checks_the_log(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    inst = await _submitted(api)
    query = "query($i:ID!){verifyProcess(id:$i){valid eventsChecked problems{code}}}"
    data = await api.ok(query, {"i": inst["id"]})
    assert data["verifyProcess"] == {"valid": True, "eventsChecked": 2, "problems": []}
