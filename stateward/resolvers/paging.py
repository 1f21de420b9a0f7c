"""Pagination of every growing list: limits, opaque cursors and pages of plain values.

Cursors are opaque (base64 of a small JSON array of keyset values). Two ways to make a
`Page`, both independent of GraphQL types (the schema wraps a page's items into nodes,
`schema.types.connection.Connection.of`):

- `page_of(items, first, key)`: the runtime fetched `first + 1` rows after the decoded
  cursor (keyset pagination in SQL); the extra row only says "there is more".
- `page_of_list(items, first, after, key, last, before)`: a list already in memory
  (states, versions, an instance's assignments from a DataLoader) paged both ways by the
  same cursor rules.
- `Window` + `keyset_page`: searches that page both ways (`first/after`, `last/before`):
  the runtime fetched `limit + 1` rows past the cursor in the listing's order, or in its
  mirror image when paging backward; the cursor also names the ordering it belongs to.

A page may carry `total`, an awaitable count that the connection's `totalCount` calls only
when that field is selected.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
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
    total: Callable[[], Awaitable[int]] | None = None

    def map(self, fn: Callable[[T], U]) -> Page[U]:
        """The same page with `fn` applied to each item."""
        return Page(
            [fn(i) for i in self.items], self.cursors, self.has_next, self.has_previous,
            self.total,
        )  # fmt: skip

    def counted(self, total: Callable[[], Awaitable[int]]) -> Page[T]:
        """This page with `total` as its (lazy) count."""
        return replace(self, total=total)


def known_total(n: int) -> Callable[[], Awaitable[int]]:
    """A lazy count whose value is already known."""

    async def total() -> int:
        return n

    return total


def page_of(
    items: Sequence[T], first: int, key: Callable[[T], Sequence[Any]], *,
    has_previous: bool = False,
) -> Page[T]:  # fmt: skip
    """The page of `items` fetched with limit `first + 1` after a cursor."""
    page = list(items[:first])
    return Page(page, [encode_cursor(key(i)) for i in page], len(items) > first, has_previous)


def page_of_list(
    items: Sequence[T], first: int | None, after: str | None,
    key: Callable[[T], Sequence[Any]], last: int | None = None, before: str | None = None,
) -> Page[T]:  # fmt: skip
    """A page of a list already in memory, ordered by `key` ascending: forward with
    `first/after`, or backward with `last/before` (the `last` items before the cursor,
    still in ascending order; the same cursors and limits as `Window.of`)."""
    window = Window.of(first, after, last, before)
    if window.backward:
        return _page_of_list_backward(items, window, key)
    limit = window.limit
    start = 0
    if after is not None:
        mark = decode_cursor(after)
        start = next((n for n, i in enumerate(items) if list(key(i)) > mark), len(items))
    page = page_of(items[start : start + limit + 1], limit, key, has_previous=start > 0)
    return page.counted(known_total(len(items)))


def _page_of_list_backward(
    items: Sequence[T], window: Window, key: Callable[[T], Sequence[Any]]
) -> Page[T]:
    end = len(items)
    if window.cursor is not None:
        mark = decode_cursor(window.cursor, "/before")
        end = next((n for n, i in enumerate(items) if list(key(i)) >= mark), len(items))
    start = max(0, end - window.limit)
    page = list(items[start:end])
    cursors = [encode_cursor(key(i)) for i in page]
    return Page(page, cursors, end < len(items), start > 0, known_total(len(items)))


@dataclass(frozen=True)
class Window:
    """Which page of a two-way listing: `limit` rows past `cursor`, backward or not."""

    limit: int
    cursor: str | None = None
    backward: bool = False

    @classmethod
    def of(
        cls, first: int | None, after: str | None, last: int | None, before: str | None
    ) -> Window:
        """The window of Relay's `first/after` (forward) or `last/before` (backward)."""
        if last is None and before is None:
            return cls(page_size(first), after)
        if first is not None or after is not None:
            raise DomainError(
                INVALID_INPUT, "page forward (first/after) or backward (last/before), not both",
                pointer="/last" if last is not None else "/before",
            )  # fmt: skip
        if last is not None and (last < 0 or last > MAX_FIRST):
            raise DomainError(
                INVALID_INPUT, f"last must be between 0 and {MAX_FIRST}", pointer="/last"
            )
        return cls(DEFAULT_FIRST if last is None else last, before, backward=True)

    def position(self, tag: str) -> tuple[Any, str] | None:
        """The (sort value, id) of the cursor, which must belong to the ordering `tag`."""
        if self.cursor is None:
            return None
        pointer = "/before" if self.backward else "/after"
        values = decode_cursor(self.cursor, pointer)
        if len(values) != 3 or values[0] != tag or not isinstance(values[2], str):
            raise DomainError(
                INVALID_INPUT, "invalid cursor (or one made for another orderBy)", pointer=pointer
            )
        return values[1], values[2]


def id_mark(window: Window) -> int | None:
    """The id of a window's `[id]` cursor (listings keyed by an integer id alone)."""
    if window.cursor is None:
        return None
    pointer = "/before" if window.backward else "/after"
    values = decode_cursor(window.cursor, pointer)
    if not values or not isinstance(values[0], int) or isinstance(values[0], bool):
        raise DomainError(INVALID_INPUT, "invalid cursor", pointer=pointer)
    return values[0]


def time_mark(window: Window) -> tuple[datetime, str] | None:
    """The `(created_at, id)` of a window's cursor (listings ordered by creation time, then
    id); a forged one (not two strings, not an instant with its zone) is INVALID_INPUT."""
    if window.cursor is None:
        return None
    pointer = "/before" if window.backward else "/after"
    mark = decode_cursor(window.cursor, pointer)
    try:
        if len(mark) != 2 or not all(isinstance(v, str) for v in mark):
            raise ValueError(mark)
        created = datetime.fromisoformat(mark[0])
        if created.tzinfo is None:
            raise ValueError(mark)
        return created, mark[1]
    except ValueError:
        raise DomainError(INVALID_INPUT, "not a cursor of this list", pointer=pointer) from None


def mirrored_page(window: Window, rows: Sequence[T], key: Callable[[T], Sequence[Any]]) -> Page[T]:
    """The backward page of `rows`, fetched with `window.limit + 1` past the `before`
    cursor in the listing's mirrored order: reversed into the listing's order, with the
    same cursors forward paging makes."""
    n = window.limit
    items = list(rows[:n])[::-1]
    cursors = [encode_cursor(key(i)) for i in items]
    return Page(items, cursors, window.cursor is not None, len(rows) > n)


def keyset_page(
    window: Window, rows: Sequence[T], positions: Sequence[tuple[Any, str]], tag: str
) -> Page[T]:
    """The page of `rows` (fetched with `window.limit + 1`, in the mirrored order when
    paging backward) with cursors `[tag, sort value, id]`."""
    n = window.limit
    items, marks = list(rows[:n]), list(positions[:n])
    more = len(rows) > n
    if window.backward:
        items.reverse()
        marks.reverse()
    cursors = [encode_cursor([tag, _plain(v), pid]) for v, pid in marks]
    started = window.cursor is not None
    if window.backward:
        return Page(items, cursors, has_next=started, has_previous=more)
    return Page(items, cursors, has_next=more, has_previous=started)


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def page_size(first: int | None) -> int:
    """`first` checked against the limits (default 20, at most 100)."""
    if first is None:
        return DEFAULT_FIRST
    if first < 0 or first > MAX_FIRST:
        raise DomainError(
            INVALID_INPUT, f"first must be between 0 and {MAX_FIRST}", pointer="/first"
        )
    return first


#: `json.dumps(..., separators=(",", ":"), default=str)` without building an encoder per
#: call (a page of 100 events makes 100 cursors; issue 16).
_CURSOR_JSON = json.JSONEncoder(separators=(",", ":"), default=str)


def encode_cursor(values: Sequence[Any]) -> str:
    """An opaque cursor for a keyset position (JSON-serialisable values)."""
    if all(type(v) is int for v in values):  # the common keyset (seq, id): as JSON writes it
        text = "[" + ",".join(map(str, values)) + "]"
    else:
        text = _CURSOR_JSON.encode(list(values))
    return base64.urlsafe_b64encode(text.encode()).decode("ascii")


def decode_cursor(cursor: str, pointer: str = "/after") -> list[Any]:
    """The keyset position of a cursor made by `encode_cursor`; INVALID_INPUT otherwise."""
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
    except (binascii.Error, ValueError, UnicodeError):
        value = None
    if not isinstance(value, list):
        raise DomainError(INVALID_INPUT, "invalid cursor", pointer=pointer)
    return value
