"""Per-client rate limiting of the public entry (DESIGN §7, `RATE_LIMITED`).

An in-process token bucket per IP: `limit` requests per minute, refilled continuously,
time read from the runtime's clock (tests move it by hand). Each node limits on its own,
so N nodes behind a balancer allow up to N × limit: acceptable for abuse protection of
a visitor form, and recorded in docs/decisions.md.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from datetime import datetime

from stateward.domain.errors import RATE_LIMITED, DomainError
from stateward.runtime.core.services import Runtime

#: How many idle buckets are kept before the oldest are forgotten.
MAX_BUCKETS = 10_000


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

    def check(self, key: str, now: datetime) -> None:
        """Count one request of `key`; RATE_LIMITED when it is over the limit."""
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
            raise DomainError(
                RATE_LIMITED,
                f"too many requests from {key}: at most {self.per_minute} per minute",
                details={"limit": self.per_minute},
            )


_limiters: dict[int, tuple[weakref.ref[Runtime], RateLimiter]] = {}


def limiter_for(runtime: Runtime) -> RateLimiter:
    """The public-entry limiter of `runtime` (settings.public_rate_limit per minute)."""
    entry = _limiters.get(id(runtime))
    if entry is None or entry[0]() is not runtime:
        for key in [k for k, (ref, _) in _limiters.items() if ref() is None]:
            del _limiters[key]
        entry = (weakref.ref(runtime), RateLimiter(runtime.settings.public_rate_limit))
        _limiters[id(runtime)] = entry
    return entry[1]
