"""The main path through the real app: deploy -> start -> perform -> events, and errors."""

from __future__ import annotations

from graph_stack import Api, loan

DEPLOY = """mutation($d: JSON!) { addWorkflow(definition: $d) {
  id path version hash namespace name publicEntry
  states { key ordinal terminal incoming { key } outgoing { key } }
  graph { nodes { key initial terminal } edges { action source target selfEffect generated } }
} }"""
START = """mutation($w: String!, $d: JSON) { startInstance(workflow: $w, data: $d) {
  id instanceId status state { key } } }"""
PERFORM = """mutation($i: ID!, $a: String!, $in: JSON) {
  performAction(instance: $i, action: $a, input: $in) {
    duplicate instance { status data state { key } } event { seq action actor signer } } }"""


async def test_a_bearer_caller_deploys_starts_performs_and_reads_the_events(api: Api) -> None:
    deployed = (await api.ok(DEPLOY, {"d": loan()}))["addWorkflow"]
    assert (deployed["path"], deployed["version"], deployed["namespace"]) == (
        "acme/loans/loan",
        1,
        "acme/loans",
    )
    assert [s["key"] for s in deployed["states"]] == ["intake", "review", "approved", "rejected"]
    edges = {(e["action"], e["source"], e["target"]) for e in deployed["graph"]["edges"]}
    assert ("approve", "review", "approved") in edges
    assert ("note", "review", "review") in edges
    started = await api.ok(START, {"w": "acme/loans/loan", "d": {"who": "ann"}})
    instance = started["startInstance"]
    assert instance["state"]["key"] == "intake" and instance["status"] == "ACTIVE"
    done = await api.ok(PERFORM, {"i": instance["id"], "a": "submit",
                                  "in": {"fields": {"amount": 500}}})  # fmt: skip
    result = done["performAction"]
    assert result["instance"]["state"]["key"] == "review"
    assert result["instance"]["data"]["amount"] == 500
    assert result["event"]["actor"] == api.admin.public
    assert result["event"]["signer"] == api.runtime.node_public
    events = await api.ok(
        "query($p:ID!){events(process:$p){edges{cursor node{seq action}} pageInfo{hasNextPage}}}",
        {"p": instance["instanceId"]},
    )
    assert [e["node"]["action"] for e in events["events"]["edges"]] == ["$start", "submit"]


async def test_the_guard_failing_is_reported_with_its_code(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    inst = (await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]
    await api.ok(PERFORM, {"i": inst["instanceId"], "a": "submit",
                           "in": {"fields": {"amount": 5000}}})  # fmt: skip
    await api.user("acme", "manager")  # a manager exists, but the admin acts
    await api.ok("mutation($a:String!){grantRole(namespace:\"acme\",actor:$a,roles:[\"manager\"])"
                 "{members{actor roles}}}", {"a": api.admin.public})  # fmt: skip
    body = await api.gql(PERFORM, {"i": inst["instanceId"], "a": "approve"})
    assert body["errors"][0]["extensions"]["code"] == "GUARD_FAILED"


async def test_an_action_without_the_role_is_forbidden(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    inst = (await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]
    await api.ok(PERFORM, {"i": inst["id"], "a": "submit", "in": {"fields": {"amount": 1}}})
    _, analyst = await api.user("acme", "analyst")
    body = await api.gql(PERFORM, {"i": inst["id"], "a": "approve"}, token=analyst)
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"


async def test_anonymous_callers_are_unauthenticated(api: Api) -> None:
    body = await api.gql("{ instances { edges { node { id } } } }", token=None)
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    body = await api.gql(START, {"w": "acme/loans/loan"}, token=None)
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_an_invalid_definition_lists_its_problems(api: Api) -> None:
    bad = loan()
    bad["initial"] = "nowhere"
    body = await api.gql(DEPLOY, {"d": bad})
    error = body["errors"][0]
    assert error["extensions"]["code"] == "INVALID_DEFINITION"
    assert any(p["code"] == "UNKNOWN_STATE" and p["pointer"] == "/initial"
               for p in error["extensions"]["problems"])  # fmt: skip


async def test_validate_workflow_reports_errors_and_warnings_without_deploying(api: Api) -> None:
    bad = loan()
    bad["$version"] = "1.0"
    query = "query($d:JSON!){validateWorkflow(definition:$d){valid errors{code pointer}}}"
    data = await api.ok(query, {"d": bad})
    report = data["validateWorkflow"]
    assert report["valid"] is False
    assert report["errors"][0]["code"] == "UNSUPPORTED_VERSION"
    good = await api.ok("query($d:JSON!){validateWorkflow(definition:$d){valid hash}}",
                        {"d": loan()}, token=None)  # fmt: skip
    assert good["validateWorkflow"]["valid"] is True


async def test_resubmitting_a_signed_event_is_a_duplicate(api: Api) -> None:
    from stateward.runtime.core.commands import sign_as

    await api.ok(DEPLOY, {"d": loan()})
    inst = (await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]
    signed = sign_as(api.runtime, api.admin, inst["instanceId"], "submit", "acme/loans/loan",
                     {"fields": {"amount": 3}}).to_json()  # fmt: skip
    query = """mutation($e:JSON!,$s:String!,$g:String!){submitEvent(event:$e,signature:$s,signer:$g)
      { duplicate event { seq signer } instance { state { key } } } }"""
    args = {"e": signed["event"], "s": signed["signature"], "g": signed["signer"]}
    first = (await api.ok(query, args, token=None))["submitEvent"]
    again = (await api.ok(query, args, token=None))["submitEvent"]
    assert first["duplicate"] is False and again["duplicate"] is True
    assert first["event"]["seq"] == again["event"]["seq"] == 2
    assert first["event"]["signer"] == api.admin.public
    other = sign_as(api.runtime, api.admin, inst["instanceId"], "note", "acme/loans/loan",
                    {"text": "x"}).to_json()  # fmt: skip
    forged = {"e": other["event"], "s": args["s"], "g": other["signer"]}
    body = await api.gql(query, forged, token=None)
    assert body["errors"][0]["extensions"]["code"] == "BAD_SIGNATURE"


async def test_a_workflow_version_is_read_from_the_database_once(api: Api, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Versions are immutable once committed: a page that shows states reads each
    version's row once per process, and a new version is read when it first appears."""
    from stateward.persistence.workflows import WorkflowRepository

    reads: list[list[tuple[str, int]]] = []
    plain = WorkflowRepository.versions_by_keys

    async def counted(self, keys):  # type: ignore[no-untyped-def]
        keys = list(keys)
        reads.append(keys)
        return await plain(self, keys)

    monkeypatch.setattr(WorkflowRepository, "versions_by_keys", counted)
    page = "{instances(first:20){nodes{state{key} workflow{version createdAt}}}}"
    await api.ok(DEPLOY, {"d": loan()})
    await api.ok(START, {"w": "acme/loans/loan"})
    first = (await api.ok(page))["instances"]["nodes"]
    assert [n["state"]["key"] for n in first] == ["intake"]
    assert reads == [[("acme/loans/loan", 1)]]
    assert (await api.ok(page))["instances"]["nodes"] == first
    assert len(reads) == 1  # the second page read no version row
    changed = loan()
    changed["$description"] = "A small loan, again"
    await api.ok("mutation($d:JSON!){updateWorkflow(definition:$d){version}}", {"d": changed})
    await api.ok(START, {"w": "acme/loans/loan"})
    nodes = (await api.ok(page))["instances"]["nodes"]
    assert sorted(n["workflow"]["version"] for n in nodes) == [1, 2]
    assert reads[1:] == [[("acme/loans/loan", 2)]]
