"""Time for the runtime: an injectable clock so tests control "now".

The domain never reads a clock; the runtime asks its `Clock` once per event and passes
the RFC 3339 string (`ts`) down. `ManualClock` lets tests move time by hand (SLA, timers,
the ±300 s signature window) without sleeping.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Anything that can tell the current instant as an aware UTC datetime."""

    def now(self) -> datetime:
        """The current instant (aware, UTC)."""
        ...


class SystemClock:
    """The wall clock of the host."""

    def now(self) -> datetime:
        """The current instant (aware, UTC)."""
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to (tests)."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2026, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        """The instant the clock was last set to."""
        return self._now

    def advance(self, seconds: float) -> datetime:
        """Move the clock forward by `seconds` and return the new instant."""
        self._now = self._now + timedelta(seconds=seconds)
        return self._now

    def set(self, when: datetime) -> None:
        """Jump to `when` (aware)."""
        if when.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = when.astimezone(UTC)


def format_ts(when: datetime) -> str:
    """RFC 3339 UTC with milliseconds and a `Z`, the one timestamp format of events."""
    when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def parse_ts(text: str) -> datetime:
    """Parse an RFC 3339 timestamp (a trailing `Z` allowed) into an aware UTC datetime."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"timestamp without a zone: {text!r}")
    return value.astimezone(UTC)
