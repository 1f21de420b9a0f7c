"""`migrateInstance` through the real app (issue 15): a dry run, the move, the refusals."""

from __future__ import annotations

from typing import Any

from graph_stack import Api, loan

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
UPDATE = "mutation($d:JSON!){updateWorkflow(definition:$d){version}}"
START = 'mutation{startInstance(workflow:"acme/loans/loan"){instanceId id}}'
SUBMIT = """mutation($i:ID!){performAction(instance:$i,action:"submit",
  input:{fields:{amount:5}}){duplicate}}"""
MIGRATE = """mutation($i:ID!,$v:Int!,$m:JSON,$u:JSON,$d:Boolean!){
  migrateInstance(instance:$i,toVersion:$v,stateMap:$m,mutate:$u,dryRun:$d){
    plan{instanceId workflowPath fromVersion toVersion fromState toState assignmentsKept
         assignmentsCancelled assignmentOpened timersCancelled{id action key} slaDueAt
         valid problems{code message pointer}}
    instance{instanceId version state{key} data}}}"""
VERIFY = "query($i:ID!){verifyProcess(id:$i){valid}}"


def _code(body: dict[str, Any]) -> str:
    return str(body["errors"][0]["extensions"]["code"])


def _version_two() -> dict[str, Any]:
    definition = loan()
    states = definition["states"]
    first = next(k for k, v in states.items() if v.get("assign"))
    states["check"] = states.pop(first)
    for action in definition["actions"].values():
        for end in ("from", "to"):
            if action.get(end) == first:
                action[end] = "check"
            elif isinstance(action.get(end), list):
                action[end] = ["check" if x == first else x for x in action[end]]
    return definition


async def _instance(api: Api) -> tuple[str, str, str]:
    await api.ok(DEPLOY, {"d": loan()})
    started = (await api.ok(START))["startInstance"]
    await api.ok(SUBMIT, {"i": started["instanceId"]})
    await api.ok(UPDATE, {"d": _version_two()})
    state = next(k for k, v in loan()["states"].items() if v.get("assign"))
    return started["instanceId"], started["id"], state


async def test_dry_run_then_migrate_then_verify(api: Api) -> None:
    pid, global_id, state = await _instance(api)
    variables = {"i": global_id, "v": 2, "m": {state: "check"}, "u": None, "d": True}
    dry = (await api.ok(MIGRATE, variables))["migrateInstance"]
    assert dry["instance"] is None
    plan = dry["plan"]
    assert plan["valid"] and plan["problems"] == []
    assert (plan["fromState"], plan["toState"], plan["fromVersion"], plan["toVersion"]) == (
        state, "check", 1, 2,
    )  # fmt: skip
    assert len(plan["assignmentsCancelled"]) == 1
    done = (await api.ok(MIGRATE, {**variables, "d": False, "u": {"$set": {"moved": True}}}))[
        "migrateInstance"
    ]
    assert done["instance"]["version"] == 2 and done["instance"]["state"]["key"] == "check"
    assert done["instance"]["data"]["moved"] is True
    assert done["plan"]["assignmentsCancelled"] == plan["assignmentsCancelled"]
    assert (await api.ok(VERIFY, {"i": pid}))["verifyProcess"]["valid"] is True


async def test_refusals_carry_code_and_pointer(api: Api) -> None:
    pid, _, state = await _instance(api)
    body = await api.gql(MIGRATE, {"i": pid, "v": 2, "m": None, "u": None, "d": False})
    assert _code(body) == "MIGRATION_INVALID"
    assert body["errors"][0]["extensions"]["pointer"] == f"/stateMap/{state}"
    dry = await api.ok(MIGRATE, {"i": pid, "v": 2, "m": None, "u": None, "d": True})
    problems = dry["migrateInstance"]["plan"]["problems"]
    assert [p["pointer"] for p in problems] == [f"/stateMap/{state}"]
    body = await api.gql(MIGRATE, {"i": pid, "v": 2, "m": [1], "u": None, "d": False})
    assert _code(body) == "INVALID_INPUT"


async def test_roles_anonymous_no_role_and_another_tenant(api: Api) -> None:
    pid, _, state = await _instance(api)
    variables = {"i": pid, "v": 2, "m": {state: "check"}, "u": None, "d": True}
    assert _code(await api.gql(MIGRATE, variables, token=None)) == "UNAUTHENTICATED"
    _, nobody = await api.user()
    assert _code(await api.gql(MIGRATE, variables, token=nobody)) == "NOT_FOUND"
    _, other = await api.user("globex", "admin")
    assert _code(await api.gql(MIGRATE, variables, token=other)) == "NOT_FOUND"
    _, analyst = await api.user("acme", "analyst")
    assert _code(await api.gql(MIGRATE, variables, token=analyst)) == "FORBIDDEN"
    _, operator = await api.user("acme", "operator")
    answer = await api.ok(MIGRATE, {**variables, "d": False}, token=operator)
    assert answer["migrateInstance"]["instance"]["version"] == 2
