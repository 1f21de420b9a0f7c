"""Per-client rate limits (DESIGN §7, `RATE_LIMITED`), one per purpose:

- `PUBLIC`: every call of the public entry (`STATEWARD_PUBLIC_RATE_LIMIT` per minute);
- `CALLBACK_FAILURES`: failed callback-token lookups of `completeDelegatedTask`
  (`STATEWARD_CALLBACK_FAILURE_LIMIT` per minute). Only failures take a token; a client
  whose bucket is empty is refused before the lookup (`blocked`), so guessing tokens is
  slowed without limiting an integrator whose tokens are good.

A token bucket per IP: `limit` per minute, refilled continuously, time read from the
runtime's clock (tests move it by hand). Two implementations:

- `RateLimiter`: in process, per node (the memory and PostgreSQL buses);
- `SharedRateLimiter`: the same bucket kept in Redis by Lua scripts (atomic), used when
  the bus is `redis://`, so N nodes share ONE limit instead of allowing N x the limit.
  If Redis fails the node falls back to its local bucket (the service stays available).

`install_limiter(runtime, limiter, purpose)` chooses a limiter of a runtime (the container
does); `limiter_for(runtime, purpose)` returns it, a local one by default.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from stateward.domain.errors import RATE_LIMITED, DomainError
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings

#: How many idle buckets are kept before the oldest are forgotten.
MAX_BUCKETS = 10_000
log = logging.getLogger(__name__)


#: The purposes of the limiters of a runtime.
PUBLIC = "public"
CALLBACK_FAILURES = "callback-failures"


class Limiter(Protocol):
    """A per-client limit of `per_minute`: count one request of `key` (or raise
    RATE_LIMITED), or ask whether `key` has nothing left without counting."""

    per_minute: int

    async def check(self, key: str, now: datetime) -> None: ...

    async def blocked(self, key: str, now: datetime) -> bool: ...


def limited(key: str, per_minute: int) -> DomainError:
    """The RATE_LIMITED error of `key` over `per_minute`."""
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
        self.tokens = self._refilled(now)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def empty(self, now: datetime) -> bool:
        """Whether `take` at `now` would fail (nothing taken)."""
        return self._refilled(now) < 1.0

    def _refilled(self, now: datetime) -> float:
        elapsed = max(0.0, (now - self.updated).total_seconds())
        return min(self.capacity, self.tokens + elapsed * self.per_second)


@dataclass
class RateLimiter:
    """Token buckets by key (a client IP): `per_minute` requests, bursts up to it."""

    per_minute: int
    buckets: dict[str, TokenBucket] = field(default_factory=dict)

    async def check(self, key: str, now: datetime) -> None:
        """Count one request of `key`; RATE_LIMITED when it is over the limit."""
        self.take(key, now)

    async def blocked(self, key: str, now: datetime) -> bool:
        """Whether a `check` of `key` now would be refused (nothing counted)."""
        return self.empty(key, now)

    def empty(self, key: str, now: datetime) -> bool:
        """`blocked` without awaiting."""
        bucket = self.buckets.get(key)
        return self.per_minute > 0 and bucket is not None and bucket.empty(now)

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
            raise limited(key, self.per_minute)


# KEYS[1] the bucket; ARGV: capacity, refill per second, now (epoch seconds). Both scripts
# begin by refilling `tokens` to now (the bucket of `TokenBucket`).
_REFILL = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
"""
#: Take one token: 1 = allowed.
_BUCKET_LUA = (
    _REFILL
    + """
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(capacity / rate) + 1)
return allowed
"""
)
#: Read without taking or writing: 1 = a `check` now would be refused.
_EMPTY_LUA = (
    _REFILL
    + """
if tokens < 1 then
  return 1
end
return 0
"""
)


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
            raise limited(key, self.per_minute)

    async def blocked(self, key: str, now: datetime) -> bool:
        """Whether a `check` of `key` now would be refused, read in Redis (nothing
        counted)."""
        if self.per_minute <= 0:
            return False
        limit = float(self.per_minute)
        try:
            empty = await self.redis.eval(
                _EMPTY_LUA, 1, f"{self.prefix}:{key}", limit, limit / 60.0, now.timestamp()
            )
        except Exception as error:  # Redis down: this node's bucket
            log.warning("shared rate limit unavailable (%s); using this node's", error)
            return self.fallback.empty(key, now)
        return int(empty) == 1


_limiters: dict[tuple[int, str], tuple[weakref.ref[Runtime], Limiter]] = {}


def install_limiter(runtime: Runtime, limiter: Limiter, purpose: str = PUBLIC) -> None:
    """Make `limiter` the `purpose` limiter of `runtime`."""
    for key in [k for k, (ref, _) in _limiters.items() if ref() is None]:
        del _limiters[key]
    _limiters[id(runtime), purpose] = (weakref.ref(runtime), limiter)


def limiter_for(runtime: Runtime, purpose: str = PUBLIC) -> Limiter:
    """The `purpose` limiter of `runtime`: the installed one, else a local `RateLimiter`
    of the setting's limit per minute made on first use."""
    entry = _limiters.get((id(runtime), purpose))
    if entry is None or entry[0]() is not runtime:
        install_limiter(runtime, RateLimiter(per_minute(runtime.settings, purpose)), purpose)
        entry = _limiters[id(runtime), purpose]
    return entry[1]


def per_minute(settings: Settings, purpose: str) -> int:
    """The configured limit of `purpose` (0 = none)."""
    if purpose == CALLBACK_FAILURES:
        return settings.callback_failure_limit
    return settings.public_rate_limit
