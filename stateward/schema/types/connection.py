"""One generic Relay connection (`edges{cursor node}`, `pageInfo`) for every growing list.

`Connection[Instance]` becomes `InstanceConnection` in the SDL. The resolvers return
plain `Page`s of records (`stateward.resolvers.paging`: limits, cursors, keyset rules);
`Connection.of(page, wrap)` turns one into edges of schema nodes. `from_page` and
`from_list` do both steps at once for lists the schema pages itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

import strawberry

from stateward.resolvers.paging import (
    DEFAULT_FIRST,
    MAX_FIRST,
    Page,
    decode_cursor,
    encode_cursor,
    page_of,
    page_of_list,
    page_size,
)

__all__ = [
    "DEFAULT_FIRST",
    "MAX_FIRST",
    "Connection",
    "Edge",
    "PageInfo",
    "decode_cursor",
    "encode_cursor",
    "page_size",
]

T = TypeVar("T")


@strawberry.type(
    description="Where a page is in its list: whether more items follow either way, and "
    "the cursors of its first and last items."
)
class PageInfo:
    """Relay page info: whether more items follow, and the cursors of this page's ends."""

    has_next_page: bool = strawberry.field(
        description="More items follow this page (page on with `after: endCursor`)."
    )
    has_previous_page: bool = strawberry.field(
        description="Items come before this page (page back with `before: startCursor`)."
    )
    start_cursor: str | None = strawberry.field(
        description="The cursor of the page's first item (null for an empty page)."
    )
    end_cursor: str | None = strawberry.field(
        description="The cursor of the page's last item (null for an empty page)."
    )


@strawberry.type(description="One item of a page, with its cursor.")
class Edge(Generic[T]):
    """One item of a connection with the cursor to page after it."""

    cursor: str = strawberry.field(
        description="Opaque position of this item: pass it as `after` or `before`."
    )
    node: T = strawberry.field(description="The item.")


@strawberry.type(description="One page of a list (a Relay connection).")
class Connection(Generic[T]):
    """A page of a growing list (Relay connection)."""

    edges: list[Edge[T]] = strawberry.field(description="The page's items with their cursors.")
    page_info: PageInfo = strawberry.field(description="Where this page is in the list.")
    _total: strawberry.Private[Callable[[], Awaitable[int]] | None] = None

    @strawberry.field(
        description="How many items the whole list holds (all pages); counted only when selected."
    )
    async def total_count(self) -> int | None:
        return None if self._total is None else await self._total()

    @strawberry.field(description="The nodes of this page (shortcut for edges { node }).")
    def nodes(self) -> list[T]:
        return [edge.node for edge in self.edges]

    @classmethod
    def of(cls, page: Page[Any], wrap: Callable[[Any], T] | None = None) -> Connection[T]:
        """The connection of a resolver's `page`, each item wrapped into a node by `wrap`."""
        edges = [
            Edge(cursor=c, node=wrap(i) if wrap else i)
            for i, c in zip(page.items, page.cursors, strict=True)
        ]
        info = PageInfo(
            has_next_page=page.has_next,
            has_previous_page=page.has_previous,
            start_cursor=edges[0].cursor if edges else None,
            end_cursor=edges[-1].cursor if edges else None,
        )
        return cls(edges=edges, page_info=info, _total=page.total)  # type: ignore[arg-type]

    @classmethod
    def from_page(
        cls, items: Sequence[Any], first: int, key: Callable[[Any], Sequence[Any]],
        *, has_previous: bool = False, wrap: Callable[[Any], T] | None = None,
    ) -> Connection[T]:  # fmt: skip
        """A connection over `items` fetched with limit `first + 1` after a cursor."""
        return cls.of(page_of(items, first, key, has_previous=has_previous), wrap)

    @classmethod
    def from_list(
        cls, items: Sequence[Any], first: int | None, after: str | None,
        key: Callable[[Any], Sequence[Any]], *, wrap: Callable[[Any], T] | None = None,
        last: int | None = None, before: str | None = None,
    ) -> Connection[T]:  # fmt: skip
        """A connection over a list already in memory, ordered by `key` ascending, paged
        forward (`first/after`) or backward (`last/before`)."""
        return cls.of(page_of_list(items, first, after, key, last, before), wrap)
