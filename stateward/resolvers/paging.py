"""Pagination of every growing list: limits, opaque cursors and pages of plain values.

Cursors are opaque (base64 of a small JSON array of keyset values). Two ways to make a
`Page`, both independent of GraphQL types (the schema wraps a page's items into nodes,
`schema.types.connection.Connection.of`):

- `page_of(items, first, key)`: the runtime fetched `first + 1` rows after the decoded
  cursor (keyset pagination in SQL); the extra row only says "there is more".
- `page_of_list(items, first, after, key)`: a list already in memory (states, versions,
  an instance's assignments from a DataLoader) paged by the same cursor rules.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from stateward.domain.errors import INVALID_INPUT, DomainError

T = TypeVar("T")
U = TypeVar("U")
DEFAULT_FIRST = 20
MAX_FIRST = 100


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of items, each with the cursor to page after it."""

    items: list[T]
    cursors: list[str]
    has_next: bool
    has_previous: bool

    def map(self, fn: Callable[[T], U]) -> Page[U]:
        """The same page with `fn` applied to each item."""
        return Page([fn(i) for i in self.items], self.cursors, self.has_next, self.has_previous)


def page_of(
    items: Sequence[T], first: int, key: Callable[[T], Sequence[Any]], *,
    has_previous: bool = False,
) -> Page[T]:  # fmt: skip
    """The page of `items` fetched with limit `first + 1` after a cursor."""
    page = list(items[:first])
    return Page(page, [encode_cursor(key(i)) for i in page], len(items) > first, has_previous)


def page_of_list(
    items: Sequence[T], first: int | None, after: str | None, key: Callable[[T], Sequence[Any]]
) -> Page[T]:
    """A page of a list already in memory, ordered by `key` ascending."""
    limit = page_size(first)
    start = 0
    if after is not None:
        mark = decode_cursor(after)
        start = next((n for n, i in enumerate(items) if list(key(i)) > mark), len(items))
    return page_of(items[start : start + limit + 1], limit, key, has_previous=start > 0)


def page_size(first: int | None) -> int:
    """`first` checked against the limits (default 20, at most 100)."""
    if first is None:
        return DEFAULT_FIRST
    if first < 0 or first > MAX_FIRST:
        raise DomainError(
            INVALID_INPUT, f"first must be between 0 and {MAX_FIRST}", pointer="/first"
        )
    return first


def encode_cursor(values: Sequence[Any]) -> str:
    """An opaque cursor for a keyset position (JSON-serialisable values)."""
    text = json.dumps(list(values), separators=(",", ":"), default=str)
    return base64.urlsafe_b64encode(text.encode()).decode("ascii")


def decode_cursor(cursor: str) -> list[Any]:
    """The keyset position of a cursor made by `encode_cursor`; INVALID_INPUT otherwise."""
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
    except (binascii.Error, ValueError, UnicodeError):
        value = None
    if not isinstance(value, list):
        raise DomainError(INVALID_INPUT, "invalid cursor", pointer="/after")
    return value
