"""Kernel resolvers: review queues, assignments, notifications and public entry.

Writes call the kernel services of `stateward.runtime.queues.assignments` / `.public`, imported
lazily so the schema builds (and the rest of the API works) before those modules exist.
Queue and notification reads go through `assignments.list_assignments`/`my_assignments`
and `notifications.list_notifications` (keyset-paged: they return `first + 1` rows).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from strawberry.types import Info

from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.search import Ordering
from stateward.records import AssignmentRecord, NotificationRecord
from stateward.resolvers.context import client_ip, runtime, viewer
from stateward.resolvers.ids import local_id
from stateward.resolvers.paging import (
    MAX_FIRST,
    Page,
    Window,
    decode_cursor,
    encode_cursor,
    keyset_page,
    page_of,
    page_size,
)


def _service(module: str, name: str) -> Any:
    """`stateward.runtime.<module>.<name>`, imported on first use."""
    return getattr(importlib.import_module(f"stateward.runtime.{module}"), name)


def _assignment(result: Any) -> AssignmentRecord:
    """The assignment a kernel service returned (a record, or a result holding one)."""
    return result if isinstance(result, AssignmentRecord) else result.assignment  # type: ignore[no-any-return]


async def team_queue(
    info: Info, team: str, status: str | None, first: int | None, after: str | None
) -> Page[AssignmentRecord]:
    """`Query.assignments(team, status)`: a team's queue in the viewer's namespaces."""
    fn = _service("queues.assignments", "list_assignments")
    limit = page_size(first)
    rt, me = runtime(info), viewer(info)
    rows = await fn(rt, me, team, status, limit, after)

    async def total() -> int:
        return int(await _service("queues.assignments", "count_assignments")(rt, me, team, status))

    return _page(rows, limit, after).counted(total)


async def my_queue(info: Info, status: str | None, window: Window) -> Page[AssignmentRecord]:
    """`Query.myAssignments`: the viewer's claims and open candidacies, oldest first,
    paged both ways (`first/after`, `last/before`); `totalCount` lazily."""
    service = importlib.import_module("stateward.runtime.queues.assignments")
    rt, me = runtime(info), viewer(info)
    order = Ordering()
    position = window.position(order.tag)
    if position is not None:
        position = (_created(position[0], window), position[1])
    rows, marks = await service.search_mine(
        rt, me, status, order=order, position=position, backward=window.backward,
        limit=window.limit + 1,
    )  # fmt: skip

    async def total() -> int:
        return int(await service.count_mine_search(rt, me, status))

    return keyset_page(window, rows, marks, order.tag).counted(total)


def _created(value: Any, window: Window) -> datetime:
    """A `myAssignments` cursor's creation time; INVALID_INPUT otherwise."""
    when = None
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            when = None
    if when is None or when.tzinfo is None:
        raise DomainError(INVALID_INPUT, "invalid cursor",
                          pointer="/before" if window.backward else "/after")  # fmt: skip
    return when


def _page(rows: list[AssignmentRecord], limit: int, after: str | None) -> Page[AssignmentRecord]:
    return page_of(
        rows, limit, key=lambda a: (a.created_at.isoformat(), a.id), has_previous=after is not None
    )


async def notifications(info: Info, window: Window, unread_only: bool) -> Page[NotificationRecord]:
    """`Query.notifications`: the viewer's and its teams', newest first, paged both ways
    (cursors `[id]`: `after` pages to older ones, `before` to newer ones)."""
    fn = _service("sweeps.notifications", "list_notifications")
    mark = None
    if window.cursor is not None:
        pointer = "/before" if window.backward else "/after"
        values = decode_cursor(window.cursor, pointer)
        if len(values) != 1 or not isinstance(values[0], int) or isinstance(values[0], bool):
            raise DomainError(INVALID_INPUT, "invalid cursor", pointer=pointer)
        mark = values[0]
    rt, me = runtime(info), viewer(info)
    fetch = min(window.limit + 1, MAX_FIRST)
    if window.backward:
        rows = await fn(
            rt, me, fetch, None, unread_only, newer_than=mark if mark is not None else 0
        )
        items = list(rows[: window.limit])[::-1]
        more = len(rows) > window.limit
        page = Page(items, [encode_cursor([n.id]) for n in items], mark is not None, more)
    else:
        rows = await fn(rt, me, fetch, mark, unread_only)
        page = page_of(rows, window.limit, key=lambda n: (n.id,), has_previous=mark is not None)

    async def total() -> int:
        count = _service("sweeps.notifications", "count_notifications")
        return int(await count(rt, me, unread_only))

    return page.counted(total)


async def unread_count(info: Info) -> int:
    """`Query.unreadCount`: the viewer's unread notifications (its teams' included)."""
    count = _service("sweeps.notifications", "count_notifications")
    return int(await count(runtime(info), viewer(info), True))


async def mark_notifications_read(info: Info, idents: list[str]) -> list[int]:
    """`markNotificationsRead(ids)`: node ids or raw row ids; the ids marked."""
    ids: list[int] = []
    for n, ident in enumerate(idents):
        local = local_id(str(ident), "Notification")
        if not local.isdigit() or len(local) > 18:
            raise DomainError(INVALID_INPUT, "not a notification id", pointer=f"/ids/{n}")
        ids.append(int(local))
    fn = _service("sweeps.notifications", "mark_notifications_read")
    return list(await fn(runtime(info), viewer(info), ids))


async def claim(info: Info, ident: str) -> AssignmentRecord:
    """`claimAssignment(id)`."""
    fn = _service("queues.assignments", "claim_assignment")
    return _assignment(await fn(runtime(info), viewer(info).actor, local_id(ident, "Assignment")))


async def unclaim(info: Info, ident: str) -> AssignmentRecord:
    """`unclaimAssignment(id)`."""
    fn = _service("queues.assignments", "unclaim_assignment")
    return _assignment(await fn(runtime(info), viewer(info).actor, local_id(ident, "Assignment")))


async def complete(
    info: Info, ident: str, review_data: Any, action: str | None, input: Any = None
) -> AssignmentRecord:
    """`completeAssignment(id, reviewData, action, input)`: review + action in one event."""
    fn = _service("queues.assignments", "complete_assignment")
    data = dict(review_data) if isinstance(review_data, Mapping) else review_data
    if input is not None and not isinstance(input, Mapping):
        raise DomainError(INVALID_INPUT, "input must be an object", pointer="/input")
    result = await fn(
        runtime(info), viewer(info).actor, local_id(ident, "Assignment"), data, action,
        None if input is None else dict(input),
    )  # fmt: skip
    return _assignment(result)


async def cancel(info: Info, ident: str) -> AssignmentRecord:
    """`cancelAssignment(id)`."""
    fn = _service("queues.assignments", "cancel_assignment")
    return _assignment(await fn(runtime(info), viewer(info).actor, local_id(ident, "Assignment")))


async def issue_entry_token(info: Info, instance: str) -> str:
    """`issueEntryToken(instance)`: a visitor token for a started instance."""
    fn = _service("public.entry", "issue_entry_token")
    result = await fn(runtime(info), viewer(info).actor, local_id(instance, "Instance"))
    return result if isinstance(result, str) else str(result.token)


async def start_public(info: Info, workflow: str, data: Any) -> tuple[str, Any]:
    """`startPublic(workflow, data)`: anyone may start a workflow whose initial is public;
    (the visitor's token, its view)."""
    fn = _service("public.entry", "start_public")
    result = await fn(runtime(info), workflow, data or {}, ip=client_ip(info))
    token, view = result if isinstance(result, tuple) else (result.token, result.view)
    return token, view


async def public_entry(info: Info, token: str) -> Any:
    """`Query.publicEntry(token)`: the visitor's view of its instance."""
    fn = _service("public.entry", "public_view")
    return await fn(runtime(info), token, ip=client_ip(info))


async def advance_public(info: Info, token: str, action: str | None, input: Any) -> Any:
    """`advancePublic(token, action, input)`: a visitor acts on its current step."""
    fn = _service("public.entry", "advance_public")
    return await fn(runtime(info), token, action, input or {}, ip=client_ip(info))
