"""The outbox: bus messages written with their event, published after commit.

`id` is the subscription cursor and must grow in COMMIT order, not just insert order,
or a subscriber catching up with `id > cursor` could skip a row committed late. SQLite
has one writer at a time, so this holds by construction. On PostgreSQL the rows are
inserted by the sequencer step (`persistence/sequencer.py`) just before COMMIT, under the
global advisory lock taken last: `stage` queues a row for it, and the row gets its id
when the unit of work commits (`StagedMessage.sequenced()`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from stateward.persistence.base import Repository, to_record
from stateward.persistence.models_ops import Meta, Outbox
from stateward.persistence.sequencer import (
    LOCKED_INFO as _LOCKED,
)
from stateward.persistence.sequencer import (
    SEQUENCER_LOCK_KEY,
    Sequencer,
    StagedMessage,
)
from stateward.records import OutboxFilter, OutboxRecord

O = cast(Table, Outbox.__table__)  # noqa: E741
MT = cast(Table, Meta.__table__)
#: The old name of the sequencer lock (the outbox was its only user).
OUTBOX_LOCK_KEY = SEQUENCER_LOCK_KEY
#: `meta` key: the highest outbox id committed by a runtime without publishers (a CLI tool
#: has no bus). Relays publish such rows as a matter of course, not as crash recovery.
HANDOFF_KEY = "outbox_handoff"


async def take_sequence_lock(session: AsyncSession) -> None:
    """The global, transaction-scoped lock that orders outbox ids and log indexes by
    commit (PostgreSQL; SQLite has one writer anyway). Taken once per transaction."""
    if session.get_bind().dialect.name != "postgresql" or session.info.get(_LOCKED):
        return
    await session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": OUTBOX_LOCK_KEY})
    session.info[_LOCKED] = True


def _record(row: Any) -> OutboxRecord:
    return to_record(OutboxRecord, row)


class OutboxRepository(Repository):
    """Append, relay and catch-up reads of `outbox` rows."""

    def __init__(self, session: AsyncSession, sequencer: Sequencer) -> None:
        super().__init__(session)
        self.sequencer = sequencer

    def stage(
        self,
        type: str,
        payload: dict[str, Any],
        now: datetime,
        *,
        namespace: str | None = None,
        workflow: str | None = None,
        instance_id: str | None = None,
        team: str | None = None,
    ) -> StagedMessage:
        """Queue one bus message (DESIGN §9 payload without `id`, which the row supplies)
        for the sequencer step; `.sequenced()` is its row once the unit of work committed."""
        return self.sequencer.stage_message(
            type,
            payload,
            now,
            namespace=namespace,
            workflow=workflow,
            instance_id=instance_id,
            team=team,
        )

    async def unpublished(self, after_id: int = 0, limit: int = 100) -> list[OutboxRecord]:
        """Rows not yet published (the relay's work), in id order."""
        stmt = (
            select(O)
            .where(O.c.published_at.is_(None), O.c.id > after_id)
            .order_by(O.c.id)
            .limit(limit)
        )
        return [_record(r) for r in await self.session.execute(stmt)]

    async def unpublished_marks(
        self, after_id: int = 0, limit: int = 100
    ) -> list[tuple[int, datetime]]:
        """(id, created_at) of the rows `unpublished` would return: what the relay's sweep
        looks at first (under write load nearly all of them are published a moment later,
        so their payloads are not read or decoded)."""
        stmt = (
            select(O.c.id, O.c.created_at)
            .where(O.c.published_at.is_(None), O.c.id > after_id)
            .order_by(O.c.id)
            .limit(limit)
        )
        return [(int(r.id), r.created_at) for r in await self.session.execute(stmt)]

    async def by_ids(self, ids: Sequence[int]) -> list[OutboxRecord]:
        """The rows `ids` (those that exist), in id order."""
        if not ids:
            return []
        stmt = select(O).where(O.c.id.in_(list(ids))).order_by(O.c.id)
        return [_record(r) for r in await self.session.execute(stmt)]

    async def mark_published(self, ids: Sequence[int], now: datetime) -> int:
        """Mark rows published; returns how many were still unpublished."""
        if not ids:
            return 0
        stmt = (
            update(O)
            .where(O.c.id.in_(list(ids)), O.c.published_at.is_(None))
            .values(published_at=now)
        )
        return int((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def events_after(
        self, cursor: int, where: OutboxFilter = OutboxFilter(), limit: int = 500
    ) -> list[OutboxRecord]:
        """Catch-up for a subscriber: rows with id > `cursor` matching `where`, in order."""
        stmt = select(O).where(O.c.id > cursor).order_by(O.c.id).limit(limit)
        if where.types:
            stmt = stmt.where(O.c.type.in_(list(where.types)))
        for column, value in (
            (O.c.namespace, where.namespace),
            (O.c.workflow, where.workflow),
            (O.c.instance_id, where.instance_id),
            (O.c.team, where.team),
        ):
            if value is not None:
                stmt = stmt.where(column == value)
        return [_record(r) for r in await self.session.execute(stmt)]

    async def last_id(self) -> int:
        """The highest cursor so far (0 when empty): where a fresh subscriber starts."""
        value = (await self.session.execute(select(func.max(O.c.id)))).scalar_one_or_none()
        return int(value or 0)


class MetaRepository(Repository):
    """Deployment facts (`net` id, ...) as key/value text."""

    async def get(self, key: str) -> str | None:
        """The value of `key`, or None."""
        stmt = select(MT.c.value).where(MT.c.key == key)
        return cast(str | None, (await self.session.execute(stmt)).scalar_one_or_none())

    async def set(self, key: str, value: str) -> None:
        """Set `key` to `value` (insert or overwrite)."""
        if await self.get(key) is None:
            await self.session.execute(insert(MT).values(key=key, value=value))
        else:
            await self.session.execute(update(MT).where(MT.c.key == key).values(value=value))

    async def get_or_create(self, key: str, value: str) -> str:
        """The value of `key`, setting it to `value` first if absent (first writer wins)."""
        stmt = self.insert_ignoring_conflicts(MT, {"key": key, "value": value}, ("key",))
        await self.session.execute(stmt)
        return await self.get(key) or value
