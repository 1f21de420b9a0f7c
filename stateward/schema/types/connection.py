"""One generic Relay connection (`edges{cursor node}`, `pageInfo`) for every growing list.

`Connection[Instance]` becomes `InstanceConnection` in the SDL. Cursors are opaque
(base64 of a small JSON array of keyset values). Two ways to build a page:

- `Connection.from_page(items, first, key)`: the runtime fetched `first + 1` rows after
  the decoded cursor (keyset pagination in SQL); the extra row only says "there is more".
- `Connection.from_list(items, first, after, key)`: a list already in memory (states,
  versions, an instance's assignments from a DataLoader) paged by the same cursor rules.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import strawberry

from stateward.domain.errors import INVALID_INPUT, DomainError

T = TypeVar("T")
DEFAULT_FIRST = 20
MAX_FIRST = 100


@strawberry.type
class PageInfo:
    """Relay page info: whether more items follow, and the cursors of this page's ends."""

    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@strawberry.type
class Edge(Generic[T]):
    """One item of a connection with the cursor to page after it."""

    cursor: str
    node: T


@strawberry.type
class Connection(Generic[T]):
    """A page of a growing list (Relay connection)."""

    edges: list[Edge[T]]
    page_info: PageInfo

    @strawberry.field(description="The nodes of this page (shortcut for edges { node }).")
    def nodes(self) -> list[T]:
        return [edge.node for edge in self.edges]

    @classmethod
    def from_page(
        cls, items: Sequence[Any], first: int, key: Callable[[Any], Sequence[Any]],
        *, has_previous: bool = False, wrap: Callable[[Any], T] | None = None,
    ) -> Connection[T]:  # fmt: skip
        """A connection over `items` fetched with limit `first + 1` after a cursor."""
        page = list(items[:first])
        edges = [Edge(cursor=encode_cursor(key(i)), node=wrap(i) if wrap else i) for i in page]
        info = PageInfo(
            has_next_page=len(items) > first,
            has_previous_page=has_previous,
            start_cursor=edges[0].cursor if edges else None,
            end_cursor=edges[-1].cursor if edges else None,
        )
        return cls(edges=edges, page_info=info)  # type: ignore[arg-type]

    @classmethod
    def from_list(
        cls, items: Sequence[Any], first: int | None, after: str | None,
        key: Callable[[Any], Sequence[Any]], *, wrap: Callable[[Any], T] | None = None,
    ) -> Connection[T]:  # fmt: skip
        """A connection over a list already in memory, ordered by `key` ascending."""
        limit = page_size(first)
        start = 0
        if after is not None:
            mark = decode_cursor(after)
            start = next((n for n, i in enumerate(items) if list(key(i)) > mark), len(items))
        return cls.from_page(
            items[start : start + limit + 1], limit, key, has_previous=start > 0, wrap=wrap
        )


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
