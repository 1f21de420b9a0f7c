"""`idempotencyKey`: a retried write answers its original event, never applies twice."""

from __future__ import annotations

import asyncio

from graph_stack import Api, loan

DEPLOY = "mutation($d: JSON!) { addWorkflow(definition: $d) { path } }"
START = """mutation($w: String!, $k: String) {
  startInstance(workflow: $w, idempotencyKey: $k) { instanceId } }"""
PERFORM = """mutation($i: ID!, $a: String!, $in: JSON, $k: String) {
  performAction(instance: $i, action: $a, input: $in, idempotencyKey: $k) {
    duplicate event { seq action } instance { data } } }"""
EVENTS = "query($p:ID!){events(process:$p){edges{node{seq action}}}}"


async def _in_review(api: Api) -> str:
    await api.ok(DEPLOY, {"d": loan()})
    pid = (await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]["instanceId"]
    await api.ok(PERFORM, {"i": pid, "a": "submit", "in": {"fields": {"amount": 5}}})
    await api.ok('mutation($a:String!){grantRole(namespace:"acme",actor:$a,roles:["analyst"])'
                 "{namespace}}", {"a": api.admin.public})  # fmt: skip
    return pid


async def _actions(api: Api, pid: str) -> list[str]:
    edges = (await api.ok(EVENTS, {"p": pid}))["events"]["edges"]
    return [e["node"]["action"] for e in edges]


async def test_a_retry_with_the_same_key_answers_the_original_event(api: Api) -> None:
    pid = await _in_review(api)
    asked = {"i": pid, "a": "note", "in": {"text": "once"}, "k": "note-1"}
    first = (await api.ok(PERFORM, asked))["performAction"]
    again = (await api.ok(PERFORM, asked))["performAction"]
    assert first["duplicate"] is False and again["duplicate"] is True
    assert again["event"] == first["event"]
    assert again["instance"]["data"]["notes"] == ["once"]
    assert (await _actions(api, pid)).count("note") == 1


async def test_the_same_key_with_other_content_is_replayed(api: Api) -> None:
    pid = await _in_review(api)
    await api.ok(PERFORM, {"i": pid, "a": "note", "in": {"text": "a"}, "k": "k-1"})
    body = await api.gql(PERFORM, {"i": pid, "a": "note", "in": {"text": "b"}, "k": "k-1"})
    assert body["errors"][0]["extensions"]["code"] == "REPLAYED"
    assert (await _actions(api, pid)).count("note") == 1


async def test_keys_are_per_actor_and_per_change(api: Api) -> None:
    pid = await _in_review(api)
    _, other = await api.user("acme", "analyst")
    await api.ok(PERFORM, {"i": pid, "a": "note", "in": {"text": "x"}, "k": "same"})
    theirs = await api.ok(PERFORM, {"i": pid, "a": "note", "in": {"text": "x"}, "k": "same"},
                          token=other)  # fmt: skip
    assert theirs["performAction"]["duplicate"] is False
    fresh = await api.ok(PERFORM, {"i": pid, "a": "note", "in": {"text": "x"}, "k": "other"})
    assert fresh["performAction"]["duplicate"] is False
    assert (await _actions(api, pid)).count("note") == 3


async def test_concurrent_retries_apply_once(api: Api) -> None:
    pid = await _in_review(api)
    asked = {"i": pid, "a": "note", "in": {"text": "race"}, "k": "race-1"}
    bodies = await asyncio.gather(*(api.gql(PERFORM, asked) for _ in range(4)))
    results = [b["data"]["performAction"] for b in bodies if not b.get("errors")]
    assert len(results) == 4, [b.get("errors") for b in bodies]
    assert sorted(r["duplicate"] for r in results) == [False, True, True, True]
    assert len({r["event"]["seq"] for r in results}) == 1
    assert (await _actions(api, pid)).count("note") == 1


async def test_start_instance_with_a_key_starts_one_instance(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    first = (await api.ok(START, {"w": "acme/loans/loan", "k": "start-1"}))["startInstance"]
    again = (await api.ok(START, {"w": "acme/loans/loan", "k": "start-1"}))["startInstance"]
    assert first["instanceId"] == again["instanceId"]
    assert await _actions(api, first["instanceId"]) == ["$start"]
    other = (await api.ok(START, {"w": "acme/loans/loan", "k": "start-2"}))["startInstance"]
    assert other["instanceId"] != first["instanceId"]


async def test_a_bad_key_is_invalid_input(api: Api) -> None:
    pid = await _in_review(api)
    body = await api.gql(PERFORM, {"i": pid, "a": "note", "in": {"text": "x"}, "k": ""})
    assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
