"""Column types that behave the same on SQLite and PostgreSQL.

`UTCDateTime` stores timezone-aware UTC instants and always returns aware datetimes
(SQLite has no timezone support: values are stored as naive UTC text and tagged back).
`JSONType` is JSONB on PostgreSQL and JSON (text) on SQLite.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

JSONType = JSON().with_variant(JSONB(), "postgresql")


class JsonText:
    """JSON text already serialized, bound to a JSON column as it is (`db.dumps_json`
    answers `text`): instance data is dumped once per write, and the text's length sizes
    the process data cache (`persistence/processes.py`). A wrapper, not a `str`
    subclass: making a subclass instance copies the text (64 KB per event on large
    instances, docs/performance.md `data18c`)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __len__(self) -> int:
        return len(self.text)

    def __repr__(self) -> str:
        return f"JsonText({self.text[:40]!r}{'…' if len(self.text) > 40 else ''})"


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp column that only accepts and only returns aware UTC datetimes."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Reject naive datetimes (ambiguous), normalise to UTC; naive UTC for SQLite."""
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"UTCDateTime expects a datetime, got {type(value).__name__}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("UTCDateTime refuses a naive datetime; pass an aware UTC value")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        """Tag naive values (SQLite) as UTC; convert aware ones to UTC."""
        if value is None:
            return None
        if isinstance(value, str):  # raw text read through a non-typed path
            value = datetime.fromisoformat(value)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utc(value: datetime) -> datetime:
    """`value` as an aware UTC datetime (naive values are taken to be UTC already)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
