"""Regression tests for the tenant-isolation findings of issue 10, through the real app.

Each test sends what the report describes (two tenants, `acme` and `globex`) and checks
the one read rule: what a caller may not read is NOT_FOUND, the same answer as for an id
that does not exist, naming no path, state or role.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from graph_stack import Api, running_stack
from tenant_world import (
    ACT,
    DEPLOY,
    START,
    Socket,
    code_of,
    error_of,
    lead,
    names_nothing,
    serve,
    subscribed,
    world,
)

REVOKE = """mutation($n:String!,$a:String!,$r:[String!]!){revokeRole(namespace:$n,actor:$a,
  roles:$r){namespace}}"""
GRANT = """mutation($n:String!,$a:String!,$r:[String!]!){grantRole(namespace:$n,actor:$a,
  roles:$r){namespace}}"""


@pytest.fixture
async def ws_url(api: Api) -> AsyncIterator[str]:
    async for url in serve(api):
        yield url


# 1. Acting on a foreign instance returned its data.
async def test_acting_on_a_foreign_instance_is_not_found_like_a_missing_one(api: Api) -> None:
    w = await world(api)
    missing = str(uuid.uuid4())
    for token in (w.globex.analyst[1], w.globex.admin[1], w.nogrant[1]):
        for action in ("submit", "note"):
            foreign = await api.gql(ACT, {"i": w.acme.instance, "a": action}, token=token)
            absent = await api.gql(ACT, {"i": missing, "a": action}, token=token)
            assert code_of(foreign) == "NOT_FOUND"
            assert error_of(foreign, w.acme.instance) == error_of(absent, missing)
            assert foreign["data"] is None and names_nothing(foreign, "acme-data", "intake")
    # The instance is untouched: one event, its `$start`.
    data = await api.ok("query($i:ID!){instance(id:$i){seq}}", {"i": w.acme.instance})
    assert data["instance"]["seq"] == 1


async def test_a_revoked_member_can_no_longer_act(api: Api) -> None:
    w = await world(api)
    key, token = w.acme.analyst
    ok = await api.gql(ACT, {"i": w.acme.instance, "a": "note", "in": {"text": "x"}}, token=token)
    assert not ok.get("errors"), ok
    await api.ok(REVOKE, {"n": "acme/sales", "a": key.public, "r": ["analyst"]})
    again = await api.gql(ACT, {"i": w.acme.instance, "a": "note", "in": {"text": "y"}},
                          token=token)  # fmt: skip
    assert code_of(again) == "NOT_FOUND"


async def test_start_instance_needs_a_role_in_the_namespace(api: Api) -> None:
    w = await world(api)
    foreign = await api.gql(START, {"w": w.acme.path}, token=w.globex.admin[1])
    absent = await api.gql(START, {"w": "acme/sales/nothing"}, token=w.globex.admin[1])
    assert code_of(foreign) == "NOT_FOUND"
    assert error_of(foreign, w.acme.path) == error_of(absent, "acme/sales/nothing")


# 4. node(id) of a Notification ignored the namespace.
async def test_a_team_notification_node_stays_in_its_namespace(api: Api) -> None:
    w = await world(api)
    async with api.runtime.uow() as uow:
        note = await uow.notifications.add(
            "team:analyst", "acme/sales", "workflow.sla.breached", {"x": 1}, api.runtime.clock.now()
        )
        await uow.commit()
    node_id = __import__("base64").b64encode(f"Notification:{note.id}".encode()).decode()
    query = "query($i:ID!){node(id:$i){id ... on Notification{kind}}}"
    mine = await api.gql(query, {"i": node_id}, token=w.acme.analyst[1])
    assert mine["data"]["node"]["kind"] == "SLA_BREACHED", mine
    theirs = await api.gql(query, {"i": node_id}, token=w.globex.analyst[1])
    missing = __import__("base64").b64encode(b"Notification:999999").decode()
    absent = await api.gql(query, {"i": missing}, token=w.globex.analyst[1])
    assert code_of(theirs) == "NOT_FOUND" and error_of(theirs) == error_of(absent)
    listed = await api.ok("{notifications{edges{node{kind}}}}", token=w.globex.analyst[1])
    assert listed["notifications"]["edges"] == []


# 5. Namespace filters used an unescaped LIKE.
async def test_an_underscore_in_a_namespace_is_not_a_wildcard(api: Api) -> None:
    await api.ok(DEPLOY, {"d": lead("acmexcorp/sales/lead")})
    started = await api.ok(START, {"w": "acmexcorp/sales/lead"})
    pid = started["startInstance"]["instanceId"]
    await api.ok(ACT, {"i": pid, "a": "submit"})  # opens an `analyst` assignment
    async with api.runtime.uow() as uow:
        await uow.notifications.add(
            "team:analyst", "acmexcorp/sales", "workflow.sla.breached", {}, api.runtime.clock.now()
        )
        await uow.commit()
    _, token = await api.user("acme_corp", "analyst")
    queue = await api.ok('{assignments(team:"analyst"){edges{node{id}}}}', token=token)
    notes = await api.ok("{notifications{edges{node{kind}}}}", token=token)
    assert queue["assignments"]["edges"] == [] and notes["notifications"]["edges"] == []
    _, real = await api.user("acmexcorp", "analyst")
    queue = await api.ok('{assignments(team:"analyst"){edges{node{id}}}}', token=real)
    assert len(queue["assignments"]["edges"]) == 1


# 7. Existence leaks.
async def test_validate_workflow_does_not_tell_whether_a_foreign_path_exists(api: Api) -> None:
    w = await world(api)
    query = "query($d:JSON!){validateWorkflow(definition:$d){valid errors{code pointer}}}"

    def spawning(target: str) -> dict:
        definition = lead("globex/sales/probe")
        definition["actions"]["win"]["spawn"] = [{"workflow": target}]
        return definition

    token = w.globex.admin[1]
    exists = await api.ok(query, {"d": spawning(w.acme.path)}, token=token)
    absent = await api.ok(query, {"d": spawning("acme/sales/nothing")}, token=token)
    assert exists == absent
    assert exists["validateWorkflow"]["errors"][0]["code"] == "UNRESOLVED_SPAWN"


async def test_clone_start_public_and_claim_answer_foreign_like_missing(api: Api) -> None:
    w = await world(api)
    token = w.globex.admin[1]
    clone = "mutation($s:String!,$t:String!){cloneWorkflow(source:$s,target:$t){path}}"
    foreign = await api.gql(clone, {"s": w.acme.path, "t": "globex/sales/copy"}, token=token)
    absent = await api.gql(clone, {"s": "acme/sales/none", "t": "globex/sales/copy"},
                           token=token)  # fmt: skip
    assert code_of(foreign) == "NOT_FOUND"
    assert error_of(foreign, w.acme.path) == error_of(absent, "acme/sales/none")

    public = "mutation($w:String!){startPublic(workflow:$w){token}}"
    foreign = await api.gql(public, {"w": w.acme.path}, token=None)
    absent = await api.gql(public, {"w": "acme/sales/none"}, token=None)
    assert error_of(foreign, w.acme.path) == error_of(absent, "acme/sales/none")

    await api.ok(ACT, {"i": w.acme.instance, "a": "submit"}, token=w.acme.admin[1])
    query = "query($i:ID!){instance(id:$i){assignments{edges{node{assignmentId}}}}}"
    rows = await api.ok(query, {"i": w.acme.instance})
    aid = rows["instance"]["assignments"]["edges"][0]["node"]["assignmentId"]
    claim = "mutation($i:ID!){claimAssignment(id:$i){status}}"
    missing = str(uuid.uuid4())
    for who in (w.globex.analyst[1], w.nogrant[1]):
        foreign = await api.gql(claim, {"i": aid}, token=who)
        absent = await api.gql(claim, {"i": missing}, token=who)
        assert code_of(foreign) == "NOT_FOUND"
        assert error_of(foreign, aid) == error_of(absent, missing)
        assert names_nothing(foreign, "analyst", "review", "acme")


# 8. grantRole accepted anything; assignmentQueue accepted the team role from anywhere.
async def test_grant_role_validates_the_actor_and_the_role_names(api: Api) -> None:
    key, _ = await api.user()
    for actor, roles in (("bob", ["analyst"]), (key.public, ["*"]), (key.public, ["a" * 300]),
                         (key.public, ["bad role"])):  # fmt: skip
        body = await api.gql(GRANT, {"n": "acme", "a": actor, "r": roles})
        assert code_of(body) == "INVALID_INPUT", (actor, roles, body)
    await api.ok(GRANT, {"n": "acme", "a": key.public, "r": ["admin", "team-lead_2"]})


async def test_assignment_queue_follows_the_rule_of_assignments(api: Api, ws_url: str) -> None:
    w = await world(api)
    queue = 'subscription{assignmentQueue(team:"analyst"){type namespace}}'
    sock = await Socket.open(ws_url, w.globex.analyst[1])
    try:
        await sock.subscribe(queue, {})
        await subscribed(api, 1)
        await api.ok(ACT, {"i": w.acme.instance, "a": "submit"}, token=w.acme.admin[1])
        assert await sock.silent(1.0)
        await api.ok(ACT, {"i": w.globex.instance, "a": "submit"}, token=w.globex.admin[1])
        message = await sock.message()
        assert message["payload"]["data"]["assignmentQueue"]["namespace"] == "globex/sales"
    finally:
        await sock.close()


# 6. Revocation did not reach open subscriptions.
async def test_revocation_reaches_an_open_subscription(api: Api, ws_url: str) -> None:
    w = await world(api)
    key, token = w.acme.analyst
    sock = await Socket.open(ws_url, token)
    try:
        await sock.subscribe("subscription($i:ID!){instanceUpdated(id:$i){data}}",
                             {"i": w.acme.instance}, op="1")  # fmt: skip
        await sock.subscribe('subscription{events(filter:{namespace:"acme/sales"}){type}}', {},
                             op="2")  # fmt: skip
        await subscribed(api, 2)
        await api.ok(ACT, {"i": w.acme.instance, "a": "note", "in": {"text": "a"}})
        seen = {(await sock.message())["id"] for _ in range(2)}
        assert seen == {"1", "2"}
        await api.ok(REVOKE, {"n": "acme/sales", "a": key.public, "r": ["analyst"]})
        await api.ok(ACT, {"i": w.acme.instance, "a": "note", "in": {"text": "b"}})
        ended = await sock.message()  # the stream ends with the answer of a missing id
        assert ended["id"] == "1" and ended["payload"]["data"] is None, ended
        assert ended["payload"]["errors"][0]["extensions"]["code"] == "NOT_FOUND"
        assert (await sock.message())["type"] == "complete"
        assert await sock.silent(1.0)  # `events` delivers nothing of acme any more
    finally:
        await sock.close()


# 6. ... nor claims: a revoked assignee kept the claim and blocked the team's queue.
async def test_a_revoked_assignees_claim_is_released_by_a_recorded_system_unclaim(
    api: Api,
) -> None:
    w = await world(api)
    key, token = w.acme.analyst
    await api.ok(ACT, {"i": w.acme.instance, "a": "submit"}, token=w.acme.admin[1])
    query = "query($i:ID!){instance(id:$i){assignments{edges{node{assignmentId status}}}}}"
    rows = await api.ok(query, {"i": w.acme.instance})
    aid = rows["instance"]["assignments"]["edges"][0]["node"]["assignmentId"]
    claim = "mutation($i:ID!){claimAssignment(id:$i){status assignee}}"
    assert (await api.ok(claim, {"i": aid}, token=token))["claimAssignment"]["status"] == "CLAIMED"
    await api.ok(REVOKE, {"n": "acme/sales", "a": key.public, "r": ["analyst"]})
    rows = await api.ok(query, {"i": w.acme.instance})
    assert rows["instance"]["assignments"]["edges"][0]["node"]["status"] == "UNASSIGNED"
    events = await api.ok(
        "query($i:ID!){events(process:$i){edges{node{action actor input}}}}",
        {"i": w.acme.instance},
    )
    last = events["events"]["edges"][-1]["node"]
    assert (last["action"], last["actor"]) == ("$unclaim", "system")
    assert last["input"] == {"assignment": aid, "reason": "revoked"}
    verdict = await api.ok("query($i:ID!){verifyProcess(id:$i){valid}}", {"i": w.acme.instance})
    assert verdict["verifyProcess"]["valid"] is True
    _, other = await api.user("acme/sales", "analyst")  # the queue is free for the team
    assert (await api.ok(claim, {"i": aid}, token=other))["claimAssignment"]["status"] == "CLAIMED"


# 2. Spawn crossed tenants.
def _grabber(target: str) -> dict:
    definition = lead("globex/sales/grab")
    definition["actions"]["submit"]["spawn"] = [
        {"workflow": target, "to": "review", "data": {"planted": "by-globex"}, "as": "kids"}
    ]
    return definition


async def test_a_cross_namespace_spawn_needs_the_targets_grant(api: Api) -> None:
    w = await world(api)
    gx = w.globex.admin[1]
    refused = await api.gql(DEPLOY, {"d": _grabber(w.acme.path)}, token=gx)
    absent = await api.gql(DEPLOY, {"d": _grabber("acme/sales/nothing")}, token=gx)
    assert code_of(refused) == "INVALID_DEFINITION"
    problems = refused["errors"][0]["extensions"]["problems"]
    assert [p["code"] for p in problems] == ["UNRESOLVED_SPAWN"]
    assert error_of(refused, w.acme.path) == error_of(absent, "acme/sales/nothing")

    allow = 'mutation($t:String!){allowSpawn(namespace:"acme/sales",to:$t){spawnAllowed}}'
    assert code_of(await api.gql(allow, {"t": "globex/sales"}, token=gx)) == "FORBIDDEN"
    granted = await api.ok(allow, {"t": "globex/sales"}, token=w.acme.admin[1])
    assert granted["allowSpawn"]["spawnAllowed"] == ["globex/sales"]
    await api.ok(DEPLOY, {"d": _grabber(w.acme.path)}, token=gx)

    pid = (await api.ok(START, {"w": "globex/sales/grab"}, token=gx))["startInstance"]
    result = await api.ok(ACT, {"i": pid["instanceId"], "a": "submit"}, token=gx)
    (kid,) = result["performAction"]["instance"]["data"]["kids"]
    child = await api.ok(
        "query($i:ID!){instance(id:$i){namespace state{key} startedBy parent{id} parentId"
        " assignments{edges{node{id}}}}}",
        {"i": kid},
        token=w.acme.admin[1],
    )
    # At its initial state, as the globex actor, past none of acme's review steps; linked
    # to its globex parent (joins), which acme readers are not shown, not even its id.
    assert child["instance"] == {
        "namespace": "acme/sales", "state": {"key": "intake"},
        "startedBy": w.globex.admin[0].public, "parent": None, "parentId": None,
        "assignments": {"edges": []},
    }  # fmt: skip
    seen = await api.ok("query($i:ID!){instance(id:$i){parentId}}", {"i": kid})
    assert seen["instance"]["parentId"] == pid["instanceId"]  # the operator reads both

    disallow = 'mutation($t:String!){disallowSpawn(namespace:"acme/sales",to:$t){spawnAllowed}}'
    await api.ok(disallow, {"t": "globex/sales"}, token=w.acme.admin[1])
    again = (await api.ok(START, {"w": "globex/sales/grab"}, token=gx))["startInstance"]
    refused = await api.gql(ACT, {"i": again["instanceId"], "a": "submit"}, token=gx)
    assert code_of(refused) == "NOT_FOUND"  # checked again at run time: nothing written
    verdict = await api.ok('{verifyProcess(id:"acme-sales-registry"){valid}}')
    assert verdict["verifyProcess"]["valid"]


STATUS = "query($i:ID!){instance(id:$i){status data lastEvents(count:1){action input}}}"


# 3. Hooks crossed tenants, and exports handed out another tenant's module source.
SCORING = "def score(ctx):\n    return {'score': 7}\n"


def _automated(hook: str) -> dict:
    return {
        "$version": "2.0",
        "$path": "globex/sales/auto",
        "initial": "intake",
        "states": {
            "intake": {"label": "Intake"},
            "scoring": {"label": "Scoring", "audience": "system", "hook": hook},
            "done": {"label": "Done", "terminal": True},
        },
        "actions": {
            "go": {"from": "intake", "to": "scoring"},
            "finish": {"from": "scoring", "to": "done"},
        },
    }


@pytest.fixture
async def slow_hooks_api(db_url: str) -> AsyncIterator[Api]:
    """The stack with a hook timeout that a loaded CI box cannot miss."""
    async with running_stack(db_url, hook_timeout_ms=20_000) as stack:
        yield stack


async def test_a_cross_namespace_hook_needs_a_shared_module(slow_hooks_api: Api) -> None:
    from stateward.runtime.hooks import automation
    from stateward.runtime.hooks.runner import HookRunner

    api = slow_hooks_api
    w = await world(api)
    gx, ax = w.globex.admin[1], w.acme.admin[1]
    add = 'mutation($s:String!){addModule(namespace:"acme/sales",name:"scoring",source:$s){seq}}'
    await api.ok(add, {"s": SCORING}, token=ax)
    refused = await api.gql(DEPLOY, {"d": _automated("acme/sales/scoring:score")}, token=gx)
    absent = await api.gql(DEPLOY, {"d": _automated("acme/sales/nothing:score")}, token=gx)
    assert code_of(refused) == "INVALID_DEFINITION"
    assert error_of(refused, "acme/sales/scoring") == error_of(absent, "acme/sales/nothing")
    assert refused["errors"][0]["extensions"]["problems"][0]["code"] == "UNRESOLVED_HOOK"

    share = """mutation($t:String!){shareModule(namespace:"acme/sales",name:"scoring",to:$t){
      sharedModules{name namespaces}}}"""
    shared = await api.ok(share, {"t": "globex/sales"}, token=ax)
    assert shared["shareModule"]["sharedModules"] == [
        {"name": "scoring", "namespaces": ["globex/sales"]}
    ]
    await api.ok(DEPLOY, {"d": _automated("acme/sales/scoring:score")}, token=gx)
    export = await api.ok('{exportPackage(namespace:"globex/sales")}', token=w.globex.analyst[1])
    assert export["exportPackage"]["modules"] == []  # acme's source is not globex's to read

    async with HookRunner(workers=1) as runner:
        hook = automation.install(api.runtime, runner)
        try:
            one = (await api.ok(START, {"w": "globex/sales/auto"}, token=gx))["startInstance"]
            await api.ok(ACT, {"i": one["instanceId"], "a": "go"}, token=gx)
            ran = await api.ok(STATUS, {"i": one["instanceId"]}, token=gx)
            assert ran["instance"]["status"] == "COMPLETED", ran
            assert ran["instance"]["data"]["score"] == 7
            unshare = share.replace("shareModule", "unshareModule")
            await api.ok(unshare, {"t": "globex/sales"}, token=ax)
            two = (await api.ok(START, {"w": "globex/sales/auto"}, token=gx))["startInstance"]
            await api.ok(ACT, {"i": two["instanceId"], "a": "go"}, token=gx)
            stopped = await api.ok(STATUS, {"i": two["instanceId"]}, token=gx)
            assert stopped["instance"]["status"] == "ERROR"  # checked again at run time
            assert "score" not in stopped["instance"]["data"]
            (last,) = stopped["instance"]["lastEvents"]
            assert (last["action"], last["input"]["code"]) == ("$automate", "HOOK_NOT_FOUND")
        finally:
            api.runtime.automation.remove(hook)


async def test_a_revoked_key_stops_an_open_subscription(
    api: Api, ws_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stateward.resolvers import streams
    from stateward.runtime.access import registry

    monkeypatch.setattr(streams, "REFRESH_AFTER", 0.0)  # re-read grants at every delivery
    w = await world(api)
    key, token = w.acme.analyst
    sock = await Socket.open(ws_url, token)
    try:
        await sock.subscribe('subscription{events(filter:{namespace:"acme/sales"}){type}}', {})
        await subscribed(api, 1)
        await api.ok(ACT, {"i": w.acme.instance, "a": "note", "in": {"text": "a"}})
        assert (await sock.message())["type"] == "next"
        await registry.revoke_key(api.runtime, api.admin, key.public)  # no bus event
        await api.ok(ACT, {"i": w.acme.instance, "a": "note", "in": {"text": "b"}})
        assert await sock.silent(1.0)
    finally:
        await sock.close()
