"""Bulk operation rows (issue 15): batches, their items, claims with leases."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, func, insert, or_, select, update

from stateward.persistence import keyset
from stateward.persistence.base import Repository, chunks, to_record
from stateward.persistence.keyset import SortKey
from stateward.persistence.models_batches import BatchItem, BatchOperation
from stateward.records import BatchItemRecord, BatchRecord

B = cast(Table, BatchOperation.__table__)
I = cast(Table, BatchItem.__table__)  # noqa: E741
RUNNING = "running"
COMPLETED = "completed"
CANCELLED = "cancelled"
PENDING = "pending"
CLAIMED = "claimed"
SUCCEEDED = "succeeded"
FAILED = "failed"
SKIPPED = "skipped"


class BatchRepository(Repository):
    """`batch_operations` and `batch_items`."""

    async def add(self, record: BatchRecord, process_ids: Sequence[str]) -> None:
        """Insert a batch and its items (positions 0..n-1, pending)."""
        await self.session.execute(insert(B).values(**record.__dict__))
        position = 0
        for part in chunks(process_ids, 1000):
            rows = [
                {"batch_id": record.id, "position": position + n, "process_id": pid,
                 "status": PENDING}
                for n, pid in enumerate(part)
            ]  # fmt: skip
            position += len(part)
            await self.session.execute(insert(I), rows)

    async def get(self, batch_id: str) -> BatchRecord | None:
        """One batch."""
        row = (await self.session.execute(select(B).where(B.c.id == batch_id))).one_or_none()
        return None if row is None else to_record(BatchRecord, row)

    async def page(
        self, limit: int, before: tuple[datetime, str] | None, created_by: str | None,
        backward: bool = False,
    ) -> list[BatchRecord]:  # fmt: skip
        """Batches newest first, after the (created_at, id) position `before`; only those of
        `created_by` unless None. `backward`: the mirrored order (oldest first), the ones
        newer than `before` (to page backward; the caller reverses them)."""
        if backward:
            keys = [SortKey(B.c.created_at, descending=True), SortKey(B.c.id, descending=True)]
            back = select(B).order_by(*keyset.order_by(keys, backward=True)).limit(limit)
            if created_by is not None:
                back = back.where(B.c.created_by == created_by)
            if before is not None:
                back = back.where(keyset.after(keys, before, backward=True))
            return [to_record(BatchRecord, r) for r in await self.session.execute(back)]
        stmt = select(B).order_by(B.c.created_at.desc(), B.c.id.desc()).limit(limit)
        if created_by is not None:
            stmt = stmt.where(B.c.created_by == created_by)
        if before is not None:
            at, ident = before
            stmt = stmt.where(or_(B.c.created_at < at, and_(B.c.created_at == at, B.c.id < ident)))
        return [to_record(BatchRecord, r) for r in await self.session.execute(stmt)]

    async def count(self, created_by: str | None) -> int:
        """How many batches `page` pages through (only `created_by`'s unless None)."""
        stmt = select(func.count()).select_from(B)
        if created_by is not None:
            stmt = stmt.where(B.c.created_by == created_by)
        return int((await self.session.execute(stmt)).scalar_one())

    async def running(self) -> list[str]:
        """Ids of the batches still running, oldest first."""
        stmt = select(B.c.id).where(B.c.status == RUNNING).order_by(B.c.created_at, B.c.id)
        return list((await self.session.execute(stmt)).scalars())

    async def claim(
        self, batch_id: str, limit: int, node: str, now: datetime, stale_before: datetime
    ) -> list[BatchItemRecord]:
        """Claim up to `limit` items of a running batch for `node`: pending ones, or claimed
        ones whose lease ran out (`claimed_at` before `stale_before`). Each item goes to
        one caller (SKIP LOCKED + a conditional update)."""
        due = and_(
            I.c.batch_id == batch_id,
            or_(
                I.c.status == PENDING,
                and_(I.c.status == CLAIMED, I.c.claimed_at < stale_before),
            ),
        )
        candidates = select(I.c.position).where(due).order_by(I.c.position).limit(limit)
        positions = await self.lock_candidates(candidates)
        if not positions:
            return []
        stmt = (
            update(I)
            .where(I.c.position.in_(positions), due)
            .values(status=CLAIMED, claimed_by=node, claimed_at=now)
            .returning(*I.c)
        )
        rows = [to_record(BatchItemRecord, r) for r in await self.session.execute(stmt)]
        return sorted(rows, key=lambda r: r.position)

    async def finish_item(
        self, item: BatchItemRecord, status: str, now: datetime, node: str,
        code: str | None = None, message: str | None = None,
    ) -> bool:  # fmt: skip
        """claimed (by `node`) -> `status`; False when the claim was lost meanwhile."""
        stmt = (
            update(I)
            .where(
                I.c.batch_id == item.batch_id, I.c.position == item.position,
                I.c.status == CLAIMED, I.c.claimed_by == node,
            )
            .values(status=status, finished_at=now, code=code, message=message)
        )  # fmt: skip
        result = await self.session.execute(stmt)
        return int(result.rowcount) == 1  # type: ignore[attr-defined]

    async def counts(self, batch_id: str) -> dict[str, int]:
        """Items by status."""
        stmt = select(I.c.status, func.count()).where(I.c.batch_id == batch_id).group_by(I.c.status)
        return {str(s): int(n) for s, n in await self.session.execute(stmt)}

    async def update(self, batch_id: str, **values: Any) -> None:
        """Set columns of a batch."""
        await self.session.execute(update(B).where(B.c.id == batch_id).values(**values))

    async def set_status(self, batch_id: str, status: str, now: datetime) -> bool:
        """running -> `status` (conditional); True for the one caller that wins."""
        stmt = (
            update(B)
            .where(B.c.id == batch_id, B.c.status == RUNNING)
            .values(status=status, finished_at=now)
        )
        result = await self.session.execute(stmt)
        return int(result.rowcount) == 1  # type: ignore[attr-defined]

    async def skip_open(self, batch_id: str, now: datetime) -> None:
        """Every item not done yet becomes `skipped` (the batch was cancelled)."""
        stmt = (
            update(I)
            .where(I.c.batch_id == batch_id, I.c.status.in_([PENDING, CLAIMED]))
            .values(status=SKIPPED, finished_at=now)
        )
        await self.session.execute(stmt)

    async def errors(
        self, batch_id: str, after: int, limit: int, before: int | None = None,
        backward: bool = False,
    ) -> list[BatchItemRecord]:  # fmt: skip
        """Failed items after position `after`, by position (`backward`: those below
        `before` when given, last position first, to page backward)."""
        if backward:
            back = select(I).where(I.c.batch_id == batch_id, I.c.status == FAILED)
            if before is not None:
                back = back.where(I.c.position < before)
            back = back.order_by(I.c.position.desc()).limit(limit)
            return [to_record(BatchItemRecord, r) for r in await self.session.execute(back)]
        stmt = (
            select(I)
            .where(I.c.batch_id == batch_id, I.c.status == FAILED, I.c.position > after)
            .order_by(I.c.position)
            .limit(limit)
        )
        return [to_record(BatchItemRecord, r) for r in await self.session.execute(stmt)]

    async def items_of(self, batch_id: str) -> list[BatchItemRecord]:
        """Every item of a batch, by position (tests, small batches)."""
        stmt = select(I).where(I.c.batch_id == batch_id).order_by(I.c.position)
        return [to_record(BatchItemRecord, r) for r in await self.session.execute(stmt)]

    async def release(self, item: BatchItemRecord, node: str) -> bool:
        """claimed (by `node`) -> pending again (a transient failure: tried later)."""
        stmt = (
            update(I)
            .where(
                I.c.batch_id == item.batch_id, I.c.position == item.position,
                I.c.status == CLAIMED, I.c.claimed_by == node,
            )
            .values(status=PENDING, claimed_by=None, claimed_at=None)
        )  # fmt: skip
        result = await self.session.execute(stmt)
        return int(result.rowcount) == 1  # type: ignore[attr-defined]
