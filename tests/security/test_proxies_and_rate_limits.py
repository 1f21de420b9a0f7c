"""Attack family: proxies and rate limits. A forged `X-Forwarded-For` must not buy a
client a fresh public rate-limit bucket (issue 9 item 6), against a real `stateward
serve` process.

Before: `serve` left uvicorn's `proxy_headers` on, and uvicorn trusts 127.0.0.1 by
default, so it rewrote the client address from the header before the app's own
trusted-proxy check; every forged address got a new bucket. And with a Redis bus each
node kept its own bucket, so N nodes allowed N x the limit (item 11).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable

import httpx
import pytest
from harness import ServerProcess

PUBLIC = '{ publicEntry(token: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA") { status } }'


async def public_codes(url: str, forwarded: list[str | None]) -> list[str | None]:
    """The error code of one public-entry call per forwarded address (None: no header)."""
    out: list[str | None] = []
    async with httpx.AsyncClient(timeout=30) as client:
        for address in forwarded:
            headers = {} if address is None else {"x-forwarded-for": address}
            body = (await client.post(url, json={"query": PUBLIC}, headers=headers)).json()
            out.append(body["errors"][0]["extensions"]["code"] if body.get("errors") else None)
    return out


async def test_a_forged_forwarded_for_does_not_bypass_the_public_rate_limit(
    server_factory: Callable[..., ServerProcess],
):
    server = server_factory(STATEWARD_PUBLIC_RATE_LIMIT="5")
    forged = [f"203.0.113.{i}" for i in range(20)]
    got = await public_codes(server.url, forged)
    assert got.count("RATE_LIMITED") >= 15, got
    assert all(code == "RATE_LIMITED" for code in got[5:]), got


async def test_a_trusted_proxy_forwards_the_client_address(
    server_factory: Callable[..., ServerProcess],
):
    server = server_factory(STATEWARD_PUBLIC_RATE_LIMIT="2", STATEWARD_TRUSTED_PROXIES="127.0.0.1")
    clients = [f"198.51.100.{i}" for i in range(6)]
    got = await public_codes(server.url, clients)
    assert "RATE_LIMITED" not in got, got  # each forwarded client has its own bucket
    again = await public_codes(server.url, ["198.51.100.1"] * 3)
    assert again[-1] == "RATE_LIMITED"


@pytest.mark.redis
@pytest.mark.postgres
async def test_nodes_sharing_a_redis_bus_share_one_public_rate_limit(
    server_factory: Callable[..., ServerProcess], postgres_db_url: str
):
    redis_url = os.environ.get("STATEWARD_TEST_REDIS_URL")
    if not redis_url:
        pytest.skip("STATEWARD_TEST_REDIS_URL is not set: Redis tests skipped")
    env = {
        "STATEWARD_BUS_URL": redis_url,
        "STATEWARD_BUS_CHANNEL": f"sw-test-{uuid.uuid4().hex[:12]}",
        "STATEWARD_PUBLIC_RATE_LIMIT": "4",
    }
    node_a = server_factory(postgres_db_url, **env)
    node_b = server_factory(postgres_db_url, **env)
    got = await public_codes(node_a.url, [None] * 3) + await public_codes(node_b.url, [None] * 3)
    assert got[:4] == ["NOT_FOUND"] * 4, got  # 4 per minute for the client, on any node
    assert got[4:] == ["RATE_LIMITED"] * 2, got
