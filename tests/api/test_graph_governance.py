"""Governance holes closed (issue 12): one registry per namespace, no instance in the
registry id space, an unchanged updateWorkflow is a no-op, key rotation and revocation
through mutations."""

from __future__ import annotations

import time
from typing import Any

from graph_stack import Api, loan

from stateward.governance.keys import generate_keypair

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){version hash}}"
UPDATE = "mutation($d:JSON!){updateWorkflow(definition:$d){version hash}}"
VALIDATE = "query($d:JSON!){validateWorkflow(definition:$d){valid errors{code pointer}}}"
GRANT = """mutation($n:String!,$a:String!){grantRole(namespace:$n,actor:$a,roles:["x"]){
  namespace}}"""
START = """mutation($w:String!,$i:ID){startInstance(workflow:$w,id:$i){instanceId}}"""
EVENTS = "query($p:ID!){events(process:$p,first:100){edges{node{seq action}}}}"
ROTATE = "mutation($k:String!){rotateKey(newKey:$k){event{action actor} duplicate}}"
REVOKE = "mutation($k:String!){revokeKey(key:$k){event{action actor input}}}"


def code(body: dict[str, Any]) -> str:
    return str(body["errors"][0]["extensions"]["code"])


async def test_a_namespace_with_a_dash_is_refused_so_registries_are_one_to_one(api: Api) -> None:
    dashed = loan("acme-loans/loan")
    report = (await api.ok(VALIDATE, {"d": dashed}))["validateWorkflow"]
    assert report["valid"] is False
    assert {"code": "AMBIGUOUS_NAMESPACE", "pointer": "/$path"} in report["errors"]
    assert code(await api.gql(DEPLOY, {"d": dashed})) == "INVALID_DEFINITION"
    body = await api.gql(GRANT, {"n": "acme-loans", "a": generate_keypair().public})
    assert code(body) == "INVALID_INPUT"
    await api.ok(DEPLOY, {"d": loan("acme/loans/loan")})  # its registry: acme-loans-registry


async def test_an_instance_cannot_take_a_registry_id(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    body = await api.gql(START, {"w": "acme/loans/loan", "i": "newns-registry"})
    assert code(body) == "INVALID_INPUT"
    await api.ok(DEPLOY, {"d": loan("newns/loans/loan")})  # the namespace is still free


async def test_an_unchanged_update_is_a_no_op_returning_the_latest(api: Api) -> None:
    first = (await api.ok(DEPLOY, {"d": loan()}))["addWorkflow"]
    before = (await api.ok(EVENTS, {"p": "acme-loans-registry"}))["events"]["edges"]
    same = (await api.ok(UPDATE, {"d": loan()}))["updateWorkflow"]
    assert same == first == {"version": 1, "hash": first["hash"]}
    after = (await api.ok(EVENTS, {"p": "acme-loans-registry"}))["events"]["edges"]
    assert after == before
    changed = loan()
    changed["$description"] = "changed"
    assert (await api.ok(UPDATE, {"d": changed}))["updateWorkflow"]["version"] == 2
    _key, token = await api.user("acme", "analyst")  # not an admin: no free read of it
    assert code(await api.gql(UPDATE, {"d": changed}, token=token)) == "FORBIDDEN"


async def test_rotate_and_revoke_keys_through_mutations(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    old, token = await api.user("acme", "admin")
    new = generate_keypair()
    rotated = (await api.ok(ROTATE, {"k": new.public}, token=token))["rotateKey"]
    assert rotated == {"event": {"action": "rotate_key", "actor": old.public}, "duplicate": False}
    # This node dropped its cached viewers: the old key's token no longer authenticates
    # (deterministic here; before, the answer hung on whether 1 s had passed since the
    # token was last read, and a slow CI box answered UNAUTHENTICATED).
    assert code(await api.gql(START, {"w": "acme/loans/loan"}, token=token)) == "UNAUTHENTICATED"
    victim, victim_token = await api.user("acme", "admin")
    assert code(await api.gql(REVOKE, {"k": victim.public}, token=victim_token)) == "FORBIDDEN"
    revoked = (await api.ok(REVOKE, {"k": victim.public}))["revokeKey"]["event"]
    assert revoked["action"] == "revoke_key" and revoked["input"] == {"key": victim.public}
    body = await api.gql(START, {"w": "acme/loans/loan"}, token=victim_token)
    assert code(body) == "UNAUTHENTICATED"


async def test_a_rotated_keys_cached_token_is_refused_by_the_engine(api: Api) -> None:
    """Another node (or this one within `VIEWER_TTL`) may still hold the old key's viewer:
    the engine refuses what it would sign for that key, BAD_SIGNATURE, never applies it."""
    await api.ok(DEPLOY, {"d": loan()})
    _old, token = await api.user("acme", "admin")
    services = api.services
    viewer = await services.authenticate(token)
    assert viewer is not None
    await api.ok(ROTATE, {"k": generate_keypair().public}, token=token)
    assert token not in services.viewers  # this node forgot it at once
    services.viewers[token] = (time.monotonic() + 60, viewer)  # a peer's unexpired entry
    assert code(await api.gql(START, {"w": "acme/loans/loan"}, token=token)) == "BAD_SIGNATURE"


async def test_rotating_to_something_that_is_not_a_new_key_is_refused(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    old, token = await api.user("acme", "admin")
    for bad in ("not-a-key", old.public):
        assert code(await api.gql(ROTATE, {"k": bad}, token=token)) == "INVALID_INPUT"
    await api.ok(START, {"w": "acme/loans/loan"}, token=token)  # the key still works
