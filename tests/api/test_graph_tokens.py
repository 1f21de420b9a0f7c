"""The viewer's API tokens: listed without secrets, revoked by their owner only."""

from __future__ import annotations

from graph_stack import Api

CREATE = 'mutation{createApiToken(label:"ci"){token}}'
LIST = "{apiTokens{id label active revokedAt expiresAt createdAt}}"
REVOKE = "mutation($i:ID!){revokeApiToken(id:$i){id active revokedAt}}"


async def test_a_viewer_lists_and_revokes_its_own_tokens_only(api: Api) -> None:
    _, session = await api.user("acme", "analyst")
    made = (await api.ok(CREATE, token=session))["createApiToken"]["token"]
    listed = (await api.ok(LIST, token=session))["apiTokens"]
    assert [t["label"] for t in listed] == ["ci", "test"]
    assert made not in str(listed) and all(t["active"] for t in listed)
    ci = listed[0]["id"]
    _, other = await api.user("acme", "analyst")
    stolen = await api.gql(REVOKE, {"i": ci}, token=other)
    assert stolen["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    assert (await api.ok("{viewer{id}}", token=made))["viewer"] is not None
    revoked = (await api.ok(REVOKE, {"i": ci}, token=session))["revokeApiToken"]
    assert revoked["id"] == ci and revoked["active"] is False and revoked["revokedAt"]
    refused = await api.gql("{namespaces}", token=made)
    assert refused["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    bad = await api.gql(REVOKE, {"i": "short"}, token=session)
    assert bad["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    anonymous = await api.gql(LIST, token=None)
    assert anonymous["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
