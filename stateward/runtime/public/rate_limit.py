"""Per-client rate limiting of the public entry (DESIGN §7, `RATE_LIMITED`).

A token bucket per IP: `limit` requests per minute, refilled continuously, time read from
the runtime's clock (tests move it by hand). Two implementations of `check`:

- `RateLimiter`: in process, per node (the memory and PostgreSQL buses);
- `SharedRateLimiter`: the same bucket kept in Redis by one Lua script (atomic), used when
  the bus is `redis://`, so N nodes share ONE limit instead of allowing N x the limit.
  If Redis fails the node falls back to its local bucket (the entry stays available).

`install_limiter(runtime, limiter)` chooses the limiter of a runtime (the container does);
`limiter_for(runtime)` returns it, a local one by default.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from stateward.domain.errors import RATE_LIMITED, DomainError
from stateward.runtime.core.services import Runtime

#: How many idle buckets are kept before the oldest are forgotten.
MAX_BUCKETS = 10_000
log = logging.getLogger(__name__)


class Limiter(Protocol):
    """What the public entry needs: count one request of `key` or raise RATE_LIMITED."""

    async def check(self, key: str, now: datetime) -> None: ...


def _limited(key: str, per_minute: int) -> DomainError:
    return DomainError(
        RATE_LIMITED,
        f"too many requests from {key}: at most {per_minute} per minute",
        details={"limit": per_minute},
    )


@dataclass
class TokenBucket:
    """A bucket of `capacity` tokens refilled at `per_second`."""

    capacity: float
    per_second: float
    tokens: float
    updated: datetime

    def take(self, now: datetime) -> bool:
        """Take one token at `now`; False when the bucket is empty."""
        elapsed = max(0.0, (now - self.updated).total_seconds())
        self.tokens = min(self.capacity, self.tokens + elapsed * self.per_second)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@dataclass
class RateLimiter:
    """Token buckets by key (a client IP): `per_minute` requests, bursts up to it."""

    per_minute: int
    buckets: dict[str, TokenBucket] = field(default_factory=dict)

    async def check(self, key: str, now: datetime) -> None:
        """Count one request of `key`; RATE_LIMITED when it is over the limit."""
        self.take(key, now)

    def take(self, key: str, now: datetime) -> None:
        """`check` without awaiting (the bucket is in this process)."""
        if self.per_minute <= 0:
            return
        bucket = self.buckets.get(key)
        if bucket is None:
            if len(self.buckets) >= MAX_BUCKETS:
                for old in sorted(self.buckets, key=lambda k: self.buckets[k].updated)[
                    : MAX_BUCKETS // 10
                ]:
                    del self.buckets[old]
            limit = float(self.per_minute)
            bucket = self.buckets[key] = TokenBucket(limit, limit / 60.0, limit, now)
        if not bucket.take(now):
            raise _limited(key, self.per_minute)


# KEYS[1] the bucket; ARGV: capacity, refill per second, now (epoch seconds). 1 = allowed.
_BUCKET_LUA = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(capacity / rate) + 1)
return allowed
"""


@dataclass
class SharedRateLimiter:
    """The token bucket of `RateLimiter`, kept in Redis for every node of a deployment.

    `redis` is a `redis.asyncio.Redis`; `prefix` separates deployments sharing a server.
    """

    per_minute: int
    redis: Any
    prefix: str
    fallback: RateLimiter = field(init=False)

    def __post_init__(self) -> None:
        self.fallback = RateLimiter(self.per_minute)

    async def check(self, key: str, now: datetime) -> None:
        """Count one request of `key` in Redis; RATE_LIMITED over the shared limit."""
        if self.per_minute <= 0:
            return
        limit = float(self.per_minute)
        try:
            allowed = await self.redis.eval(
                _BUCKET_LUA, 1, f"{self.prefix}:{key}", limit, limit / 60.0, now.timestamp()
            )
        except Exception as error:  # Redis down: limit on this node rather than fail
            log.warning("shared rate limit unavailable (%s); using this node's", error)
            self.fallback.take(key, now)
            return
        if int(allowed) != 1:
            raise _limited(key, self.per_minute)


_limiters: dict[int, tuple[weakref.ref[Runtime], Limiter]] = {}


def install_limiter(runtime: Runtime, limiter: Limiter) -> None:
    """Make `limiter` the public-entry limiter of `runtime`."""
    for key in [k for k, (ref, _) in _limiters.items() if ref() is None]:
        del _limiters[key]
    _limiters[id(runtime)] = (weakref.ref(runtime), limiter)


def limiter_for(runtime: Runtime) -> Limiter:
    """The public-entry limiter of `runtime` (settings.public_rate_limit per minute): the
    installed one, else a local `RateLimiter` made on first use."""
    entry = _limiters.get(id(runtime))
    if entry is None or entry[0]() is not runtime:
        install_limiter(runtime, RateLimiter(runtime.settings.public_rate_limit))
        entry = _limiters[id(runtime)]
    return entry[1]
