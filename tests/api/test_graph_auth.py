"""Challenge-response login with a real Ed25519 key, API tokens, and who may create them."""

from __future__ import annotations

from graph_stack import Api

from stateward.governance.keys import generate_keypair

CHALLENGE = "mutation($k:String!){authChallenge(publicKey:$k){challenge expiresAt}}"
LOGIN = """mutation($k:String!,$c:String!,$s:String!){
  authLogin(publicKey:$k,challenge:$c,signature:$s){token actor expiresAt}}"""


async def test_a_signed_challenge_opens_a_session_that_authenticates(api: Api) -> None:
    key = generate_keypair()
    challenge = (await api.ok(CHALLENGE, {"k": key.public}, token=None))["authChallenge"]
    signature = key.sign(challenge["challenge"].encode("utf-8"))
    args = {"k": key.public, "c": challenge["challenge"], "s": signature}
    session = (await api.ok(LOGIN, args, token=None))["authLogin"]
    assert session["actor"] == key.public
    me = await api.ok("{ viewer { id } }", token=session["token"])
    assert me["viewer"]["id"] == key.public


async def test_a_challenge_is_single_use(api: Api) -> None:
    key = generate_keypair()
    challenge = (await api.ok(CHALLENGE, {"k": key.public}, token=None))["authChallenge"]
    args = {"k": key.public, "c": challenge["challenge"],
            "s": key.sign(challenge["challenge"].encode())}  # fmt: skip
    await api.ok(LOGIN, args, token=None)
    body = await api.gql(LOGIN, args, token=None)
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_a_signature_by_another_key_is_a_bad_signature(api: Api) -> None:
    key, thief = generate_keypair(), generate_keypair()
    challenge = (await api.ok(CHALLENGE, {"k": key.public}, token=None))["authChallenge"]
    args = {"k": key.public, "c": challenge["challenge"],
            "s": thief.sign(challenge["challenge"].encode())}  # fmt: skip
    body = await api.gql(LOGIN, args, token=None)
    assert body["errors"][0]["extensions"]["code"] == "BAD_SIGNATURE"


async def test_a_challenge_for_a_malformed_key_is_invalid_input(api: Api) -> None:
    body = await api.gql(CHALLENGE, {"k": "not-a-key"}, token=None)
    assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT"


async def test_an_unknown_bearer_token_is_refused(api: Api) -> None:
    body = await api.gql("{ viewer { id } }", token="sw_nope")
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_users_create_tokens_for_themselves_and_only_admins_for_others(api: Api) -> None:
    query = """mutation($l:String,$a:String){createApiToken(label:$l,actor:$a)
      {token label actor expiresAt}}"""
    key, token = await api.user("acme", "analyst")
    mine = (await api.ok(query, {"l": "ci"}, token=token))["createApiToken"]
    assert mine["actor"] == key.public and mine["label"] == "ci"
    me = await api.ok('{ viewer { id roles(namespace: "acme/loans") } }', token=mine["token"])
    assert me["viewer"] == {"id": key.public, "roles": ["analyst"]}
    other = generate_keypair().public
    body = await api.gql(query, {"a": other}, token=token)
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    made = (await api.ok(query, {"a": other}))["createApiToken"]
    assert made["actor"] == other
