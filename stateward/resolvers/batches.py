"""Bulk operations (issue 15): thin glue over `runtime.batches.bulk`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from strawberry.types import Info

from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.search import InstanceSearch
from stateward.records import BatchItemRecord, BatchRecord
from stateward.resolvers.context import runtime, viewer
from stateward.resolvers.ids import local_id
from stateward.resolvers.paging import Page, Window, id_mark, mirrored_page, page_of, time_mark
from stateward.resolvers.search import resolve_ids
from stateward.runtime.batches import bulk

#: How often the `batchOperation` subscription re-reads the batch (seconds).
POLL = 0.5


def _object(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DomainError(INVALID_INPUT, f"{name} must be a JSON object", pointer=f"/{name}")
    return value


async def start(
    info: Info, kind: str, search: InstanceSearch, params: dict[str, Any]
) -> BatchRecord:
    """`bulkCancel` / `bulkMigrate` / `bulkRetry` / `bulkAction`: admin or operator."""
    return await bulk.start(runtime(info), viewer(info).actor, kind, params, resolve_ids(search))


async def bulk_cancel(info: Info, search: InstanceSearch, reason: str | None) -> BatchRecord:
    """`bulkCancel(filter, reason)`."""
    return await start(info, "cancel", search, {"reason": reason} if reason else {})


async def bulk_action(info: Info, search: InstanceSearch, action: str, input: Any) -> BatchRecord:
    """`bulkAction(filter, action, input)`."""
    return await start(info, "action", search, {"action": action, "input": _object(input, "input")})


async def bulk_migrate(
    info: Info, search: InstanceSearch, to_version: int, state_map: Any
) -> BatchRecord:
    """`bulkMigrate(filter, toVersion, stateMap)`."""
    params: dict[str, Any] = {"toVersion": to_version}
    if state_map is not None:
        params["stateMap"] = _object(state_map, "stateMap")
    return await start(info, "migrate", search, params)


async def bulk_retry(info: Info, search: InstanceSearch) -> BatchRecord:
    """`bulkRetry(filter)`."""
    return await start(info, "retry", search, {})


async def batch_operation(info: Info, ident: str) -> BatchRecord:
    """`batchOperation(id)`: its creator's, or any for a system admin."""
    return await bulk.visible(runtime(info), viewer(info).actor, local_id(ident, "BatchOperation"))


async def cancel_batch_operation(info: Info, ident: str) -> BatchRecord:
    """`cancelBatchOperation(id)`."""
    return await bulk.cancel(runtime(info), viewer(info).actor, local_id(ident, "BatchOperation"))


def _key(batch: BatchRecord) -> list[Any]:
    return [batch.created_at.isoformat(), batch.id]


async def batch_operations(
    info: Info, first: int | None, after: str | None, last: int | None = None,
    before: str | None = None,
) -> Page[BatchRecord]:  # fmt: skip
    """`batchOperations(first, after, last, before)`: newest first, paged both ways
    (`before` pages to the newer ones)."""
    window = Window.of(first, after, last, before)
    rt, actor = runtime(info), viewer(info).actor

    async def total() -> int:
        return await bulk.count_listing(rt, actor)

    if window.backward:
        found = await bulk.listing(rt, actor, window.limit + 1, time_mark(window), True)
        return mirrored_page(window, found, _key).counted(total)
    limit = window.limit
    older = time_mark(window)
    found = await bulk.listing(rt, actor, limit + 1, older)
    return page_of(found, limit, _key, has_previous=after is not None).counted(total)


async def errors(
    info: Info, batch: BatchRecord, first: int | None, after: str | None,
    last: int | None = None, before: str | None = None,
) -> Page[BatchItemRecord]:  # fmt: skip
    """`BatchOperation.errors(first, after, last, before)`: failed instances, by
    position, paged both ways (cursors `[position]`)."""
    window = Window.of(first, after, last, before)
    if window.backward:
        found = await bulk.errors(
            runtime(info), batch.id, -1, window.limit + 1, id_mark(window), backward=True
        )
        return mirrored_page(window, found, lambda i: [i.position]).counted(
            _errors_total(info, batch)
        )
    limit = window.limit
    mark = id_mark(window)
    position = -1 if mark is None else mark
    found = await bulk.errors(runtime(info), batch.id, position, limit + 1)
    page = page_of(found, limit, lambda i: [i.position], has_previous=after is not None)
    return page.counted(_errors_total(info, batch))


def _errors_total(info: Info, batch: BatchRecord) -> Callable[[], Awaitable[int]]:
    rt = runtime(info)

    async def total() -> int:
        return await bulk.count_errors(rt, batch.id)

    return total


async def watch(info: Info, ident: str) -> AsyncGenerator[BatchRecord]:
    """`Subscription.batchOperation(id)`: the batch now and after each change of its
    progress, until it is over."""
    rt, actor = runtime(info), viewer(info).actor
    batch_id = local_id(ident, "BatchOperation")
    seen: tuple[Any, ...] = ()
    while True:
        batch = await bulk.visible(rt, actor, batch_id)
        now = (batch.status, batch.succeeded, batch.failed)
        if now != seen:
            seen = now
            yield batch
        if batch.status != bulk.RUNNING:
            return
        await asyncio.sleep(POLL)
