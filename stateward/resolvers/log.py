"""Resolvers of the deployment log: checkpoints and proofs (any authenticated viewer;
an event's proof only for viewers who may read its process). They return records and
runtime values; the schema wraps them."""

from __future__ import annotations

from strawberry.types import Info

from stateward.domain.errors import INVALID_INPUT, NOT_FOUND, DomainError
from stateward.records import CheckpointRecord
from stateward.resolvers.context import require_read, runtime, viewer
from stateward.resolvers.ids import local_id
from stateward.resolvers.loaders import loaders
from stateward.resolvers.paging import Page, Window, decode_cursor, id_mark, mirrored_page, page_of
from stateward.runtime.insight import checkpoints, proofs


async def latest_checkpoint(info: Info) -> CheckpointRecord | None:
    """`Query.checkpoint`: the newest checkpoint (null before the first one)."""
    viewer(info)
    return await checkpoints.latest(runtime(info))


async def checkpoint_page(
    info: Info, first: int | None, after: str | None, last: int | None = None,
    before: str | None = None,
) -> Page[CheckpointRecord]:  # fmt: skip
    """`Query.checkpoints(first, after, last, before)`: every kept checkpoint, oldest
    first, paged both ways (cursors `[id]`)."""
    viewer(info)
    window = Window.of(first, after, last, before)
    rt = runtime(info)

    async def total() -> int:
        return await checkpoints.count(rt)

    if window.backward:
        rows = await checkpoints.page(
            rt, limit=window.limit + 1, newest_first=True, before_id=id_mark(window)
        )
        return mirrored_page(window, rows, key=lambda c: (c.id,)).counted(total)
    limit, after_id = window.limit, 0
    if after is not None:
        values = decode_cursor(after)
        if not values or not isinstance(values[0], int):
            raise DomainError(INVALID_INPUT, "invalid cursor", pointer="/after")
        after_id = values[0]
    rows = await checkpoints.page(rt, after_id=after_id, limit=limit + 1)
    return page_of(rows, limit, key=lambda c: (c.id,), has_previous=after_id > 0).counted(total)


async def event_proof(
    info: Info, process: str, seq: int, size: int | None
) -> proofs.InclusionProof:
    """`Query.eventProof(process, seq, size)`."""
    pid = local_id(process, "Instance")
    found = await loaders(info).process.load(pid)
    if found is None:
        raise DomainError(NOT_FOUND, f"process {pid} does not exist or is not visible to you")
    require_read(info, found.namespace, f"process {pid}")
    return await proofs.event_proof(runtime(info), pid, seq, size)


async def consistency_proof(info: Info, first: int, second: int | None) -> proofs.ConsistencyProof:
    """`Query.consistencyProof(from, to)`."""
    viewer(info)
    return await proofs.consistency_proof(runtime(info), first, second)
