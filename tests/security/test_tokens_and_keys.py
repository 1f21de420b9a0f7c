"""Attack family: tokens and keys. A rotated key's API tokens stop authenticating (401),
API tokens expire by default and `ttlSeconds` is capped (issue 9 item 11).

Before: rotation only stopped the old key from SIGNING; its bearer tokens kept working
with whatever the old key could still read; tokens never expired unless asked to, and
`ttlSeconds: 1e12` overflowed a date (INTERNAL_ERROR).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from graph_stack import Api

from stateward.governance.keys import generate_keypair
from stateward.runtime.access import registry
from stateward.runtime.access.auth import MAX_TOKEN_TTL
from stateward.runtime.container import VIEWER_TTL

WHOAMI = "{ viewer { id } }"
CREATE = "mutation($t:Float){createApiToken(ttlSeconds:$t){token expiresAt}}"


async def test_a_rotated_keys_tokens_stop_authenticating(api: Api):
    key, token = await api.user()
    assert (await api.gql(WHOAMI, token=token)).get("errors") is None
    await registry.rotate_key(api.runtime, key, generate_keypair().public)
    await asyncio.sleep(VIEWER_TTL + 0.2)  # a resolved viewer is cached for VIEWER_TTL
    response = await api.client.post(
        "/graphql", json={"query": WHOAMI}, headers={"authorization": f"Bearer {token}"}
    )
    assert response.status_code == 401
    assert response.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_api_tokens_expire_after_thirty_days_by_default(api: Api):
    created = (await api.ok(CREATE, {"t": None}))["createApiToken"]
    expires = datetime.fromisoformat(created["expiresAt"].replace("Z", "+00:00"))
    expected = datetime.now(UTC) + timedelta(days=30)
    assert abs((expires - expected).total_seconds()) < 600


async def test_token_ttl_is_capped_at_a_year(api: Api):
    ok = (await api.ok(CREATE, {"t": MAX_TOKEN_TTL}))["createApiToken"]
    assert ok["expiresAt"]
    for ttl in (MAX_TOKEN_TTL + 1, 1e12, 0, -5):
        body = await api.gql(CREATE, {"t": ttl})
        assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT", ttl


async def test_concurrent_requests_of_one_token_share_one_read(api: Api):
    """When a token's cached viewer expires, the requests in flight share ONE read (each
    used to read the token, key status and grants on its own); a read that began before
    the cache was dropped (a grant changed on this node) answers but is not kept."""
    from sqlalchemy import event

    _, token = await api.user()
    services = api.services
    services.viewers.clear()
    reads: list[str] = []

    def seen(conn, cursor, statement, *rest):  # type: ignore[no-untyped-def]
        if "api_tokens" in statement:
            reads.append(statement)

    event.listen(api.runtime.engine.sync_engine, "before_cursor_execute", seen)
    try:
        viewers = await asyncio.gather(*(services.authenticate(token) for _ in range(16)))
        assert len(reads) == 1
        assert len({v.actor for v in viewers if v is not None}) == 1 and None not in viewers
        assert token in services.viewers
        services.viewers.clear()
        racing = asyncio.ensure_future(services.authenticate(token))
        await asyncio.sleep(0)  # the read is under way
        services.forget_viewers()
        assert (await racing) is not None
        assert token not in services.viewers  # begun before the drop: not kept
    finally:
        event.remove(api.runtime.engine.sync_engine, "before_cursor_execute", seen)
