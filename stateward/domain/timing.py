"""RFC 3339 timestamps as the engine uses them: parse, shift, format (UTC, milliseconds).

Events carry one timestamp (`ts`); SLA deadlines and timers are computed from it by
arithmetic only, never by reading a clock, so replaying an event gives the same instants.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from stateward.domain.errors import INVALID_INPUT, DomainError


def parse_ts(value: Any, *, pointer: str = "") -> datetime:
    """Parse an RFC 3339 timestamp (with `Z` or an offset) into an aware UTC datetime.

    Raises `DomainError(INVALID_INPUT)` for anything else: a naive or malformed time is a
    bad input, not a reason to guess a timezone.
    """
    if not isinstance(value, str) or "T" not in value.upper():
        raise DomainError(INVALID_INPUT, f"not an RFC 3339 timestamp: {value!r}", pointer=pointer)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise DomainError(
            INVALID_INPUT, f"not an RFC 3339 timestamp: {value!r}", pointer=pointer
        ) from None
    if parsed.tzinfo is None:
        raise DomainError(
            INVALID_INPUT, f"timestamp without a timezone: {value!r}", pointer=pointer
        )
    return parsed.astimezone(UTC)


def format_ts(moment: datetime) -> str:
    """Format as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC, milliseconds), the log's one time format."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def normalize_ts(value: Any, *, pointer: str = "") -> str:
    """Parse then re-format a timestamp, so equal instants compare equal as strings."""
    return format_ts(parse_ts(value, pointer=pointer))


def add_seconds(ts: str, seconds: float) -> str:
    """`ts` shifted by `seconds` (fractions allowed), formatted like `format_ts`."""
    return format_ts(parse_ts(ts) + timedelta(seconds=seconds))
