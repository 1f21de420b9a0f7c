"""Per-client rate limits (`runtime/core/rate_limit.py`): the local token bucket and the
one shared by every node in Redis (real Redis, skipped when STATEWARD_TEST_REDIS_URL is
unset). `blocked` reads a bucket without taking from it, for limits that count failures
only (the callback-token lookups of `completeDelegatedTask`)."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from stateward.domain.errors import DomainError
from stateward.runtime.core.rate_limit import RateLimiter, SharedRateLimiter

REDIS_URL = os.environ.get("STATEWARD_TEST_REDIS_URL")
T0 = datetime(2026, 12, 2, tzinfo=UTC)


async def _take(limiter: Any, key: str, now: datetime) -> bool:
    """One `check`: True when allowed, False when RATE_LIMITED."""
    try:
        await limiter.check(key, now)
    except DomainError as refused:
        assert refused.code == "RATE_LIMITED"
        return False
    return True


async def _blocked_reads_without_taking(first: Any, second: Any) -> None:
    """Shared behaviour: `first` and `second` are two views of the same limit of 3."""
    assert not await second.blocked("198.51.100.1", T0)  # an unknown client has its burst
    for _ in range(50):  # reading never takes
        assert not await first.blocked("198.51.100.1", T0)
    assert [await _take(first, "198.51.100.1", T0) for _ in range(3)] == [True] * 3
    assert await second.blocked("198.51.100.1", T0)  # used up, seen from the other view
    assert not await second.blocked("198.51.100.2", T0)  # another client is untouched
    assert not await _take(second, "198.51.100.1", T0)
    later = T0 + timedelta(seconds=20)  # 3 per minute: one token back after 20 s
    assert not await first.blocked("198.51.100.1", later)
    assert await _take(second, "198.51.100.1", later)
    assert await first.blocked("198.51.100.1", later)


async def test_a_local_bucket_is_read_without_taking() -> None:
    limiter = RateLimiter(3)
    await _blocked_reads_without_taking(limiter, limiter)
    assert not await RateLimiter(0).blocked("any", T0)  # 0 = no limit


@pytest.mark.redis
@pytest.mark.skipif(not REDIS_URL, reason="STATEWARD_TEST_REDIS_URL is not set")
async def test_two_nodes_share_one_bucket_in_redis() -> None:
    from redis import asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL)
    prefix = f"stateward:test:{uuid.uuid4().hex}"
    try:
        node_a = SharedRateLimiter(3, client, prefix)
        node_b = SharedRateLimiter(3, client, prefix)
        await _blocked_reads_without_taking(node_a, node_b)
    finally:
        await client.aclose()


async def test_without_redis_a_node_falls_back_to_its_own_bucket() -> None:
    from redis import asyncio as aioredis

    client = aioredis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    try:
        limiter = SharedRateLimiter(3, client, "stateward:test:down")
        assert [await _take(limiter, "c", T0) for _ in range(4)] == [True, True, True, False]
        assert await limiter.blocked("c", T0)
        assert not await limiter.blocked("d", T0)
    finally:
        await client.aclose()
