"""The append-only event log: append (with conflict classification) and reads."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields, replace
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, func, insert, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from stateward.persistence.base import Repository, chunks, to_record
from stateward.persistence.errors import classify_integrity_error
from stateward.persistence.log import queue_leaf
from stateward.persistence.models import Event
from stateward.persistence.sequencer import Sequencer
from stateward.persistence.writebuffer import EventKey, buffer_of, matching, nonces_by_actor
from stateward.records import StoredEvent

E = cast(Table, Event.__table__)
_COLUMNS = tuple(f.name for f in fields(StoredEvent) if f.name != "id")
_INSERT = insert(E).returning(E.c.id)
#: The buffered form (`writebuffer`): many rows in one multi-row INSERT (a RETURNING
#: order is not guaranteed, so each id comes back with its row's unique `identity`).
INSERT_MANY = insert(E).returning(E.c.identity, E.c.id)


def _used_nonce(pairs: Iterable[tuple[str, str]]) -> ColumnElement[bool]:
    """Rows whose (actor, nonce) is one of `pairs`: one `actor = … AND nonce IN (…)` per
    actor, through the unique (actor, nonce) index."""
    return or_(
        *(
            and_(E.c.actor == actor, E.c.nonce.in_(nonces))
            for actor, nonces in nonces_by_actor(pairs).items()
        )
    )


def _record(row: Any) -> StoredEvent:
    return to_record(StoredEvent, row)


class EventRepository(Repository):
    """Reads and appends `events` rows as `StoredEvent`s."""

    def __init__(self, session: AsyncSession, sequencer: Sequencer | None = None) -> None:
        super().__init__(session)
        #: The unit of work's sequencer: told about every event row appended.
        self.sequencer = sequencer

    async def append(
        self, event: StoredEvent, recorded_at: datetime | None = None, *, defer: bool = False
    ) -> StoredEvent:
        """Insert `event` (its process row must exist) and return it with `id` set.

        `defer`: the caller reads no `id` before the commit, so with a write buffer on the
        transaction (`writebuffer`) the row is queued and its `id` set at the flush.

        The event joins the deployment log at commit (`LogRepository.sequence`).
        Raises `SeqConflict` or `NonceConflict` when a unique constraint
        says another event got there first; the transaction must then be rolled back.
        """
        at = recorded_at or event.recorded_at or event.ts
        stored = event if event.recorded_at == at else replace(event, recorded_at=at)
        values = {c: getattr(stored, c) for c in _COLUMNS}
        buffer = buffer_of(self.session) if defer else None
        if buffer is not None:
            buffer.events.append((stored, values))
            queue_leaf(self.session, stored)
            if self.sequencer is not None:
                self.sequencer.record_event(stored)
            return stored
        try:
            result = await self.session.execute(_INSERT, values)
        except IntegrityError as error:
            conflict = classify_integrity_error(error, event.process_id)
            if conflict is None:
                raise
            raise conflict from error
        appended = replace(stored, id=int(result.scalar_one()))
        queue_leaf(self.session, appended)
        if self.sequencer is not None:
            self.sequencer.record_event(appended)
        return appended

    async def get(self, process_id: str, seq: int) -> StoredEvent | None:
        """Event number `seq` of `process_id`, or None."""
        stmt = select(E).where(E.c.process_id == process_id, E.c.seq == seq)
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else _record(row)

    async def stored_keys(self, keys: list[EventKey]) -> frozenset[str]:
        """The identities among `keys` (identity, actor, nonce) whose envelope or whose
        (actor, nonce) is stored already (the group committer's check before a batch,
        `writebuffer.AlreadyStored`; SQLite runs it in the commit's tail). Looked up by
        (actor, nonce) alone: a stored envelope has its own pair (`originals`)."""
        found: list[Any] = []
        for chunk in chunks(keys):
            used = _used_nonce((actor, nonce) for _, actor, nonce in chunk)
            stmt = select(E.c.identity, E.c.actor, E.c.nonce).where(used)
            found += (await self.session.execute(stmt)).all()
        return matching(keys, found)

    async def originals(self, keys: list[EventKey]) -> dict[str, StoredEvent]:
        """The stored events of these very envelopes, by identity; `keys` are (identity,
        actor, nonce). Found through the unique (actor, nonce) index: an envelope's
        identity hashes its canonical bytes, which hold its actor and nonce, so its
        stored event can only be the one with its pair (identity has no index: migration
        0021). A stored event with the pair but another identity is not an original (a
        replay: `used_nonces`)."""
        wanted: dict[tuple[str, str], set[str]] = {}
        for identity, actor, nonce in keys:  # one pair may come with several envelopes
            wanted.setdefault((actor, nonce), set()).add(identity)
        found: dict[str, StoredEvent] = {}
        for chunk in chunks(list(wanted)):
            for row in await self.session.execute(select(E).where(_used_nonce(chunk))):
                if row.identity in wanted.get((row.actor, row.nonce), ()):
                    found[row.identity] = _record(row)
        return found

    async def used_nonces(self, pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
        """The (actor, nonce) pairs among `pairs` that a stored event used."""
        found: set[tuple[str, str]] = set()
        for chunk in chunks(dict.fromkeys(pairs)):
            stmt = select(E.c.actor, E.c.nonce).where(_used_nonce(chunk))
            found.update((row.actor, row.nonce) for row in await self.session.execute(stmt))
        return found

    async def by_nonce(self, actor: str, nonce: str) -> StoredEvent | None:
        """The event that used (actor, nonce), or None."""
        stmt = select(E).where(E.c.actor == actor, E.c.nonce == nonce)
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else _record(row)

    async def for_process(
        self, process_id: str, *, after_seq: int = 0, limit: int | None = None,
        before_seq: int | None = None,
    ) -> list[StoredEvent]:  # fmt: skip
        """Events of `process_id` with seq > `after_seq`, in seq order; with `before_seq`,
        the last `limit` of those with seq < `before_seq` (still in seq order: one range
        scan of the `(process_id, seq)` key read backward, to page backward)."""
        if before_seq is not None:
            back = select(E).where(
                E.c.process_id == process_id, E.c.seq > after_seq, E.c.seq < before_seq
            )
            back = back.order_by(E.c.seq.desc())
            if limit is not None:
                back = back.limit(limit)
            return [_record(r) for r in await self.session.execute(back)][::-1]
        stmt = select(E).where(E.c.process_id == process_id, E.c.seq > after_seq).order_by(E.c.seq)
        if limit is not None:
            stmt = stmt.limit(limit)
        return [_record(r) for r in await self.session.execute(stmt)]

    async def first_of_action(
        self, process_ids: Iterable[str], action: str
    ) -> dict[str, StoredEvent]:
        """Batch loader: each process's first event recorded as `action` (when it has one)."""
        found: dict[str, StoredEvent] = {}
        for batch in chunks(dict.fromkeys(process_ids)):
            stmt = (
                select(E)
                .where(E.c.process_id.in_(batch), E.c.action == action)
                .order_by(E.c.process_id, E.c.seq)
            )
            for row in await self.session.execute(stmt):
                found.setdefault(row.process_id, _record(row))
        return found

    async def latest_events_by_process(
        self, process_ids: Iterable[str], n: int
    ) -> dict[str, list[StoredEvent]]:
        """Batch loader: the last `n` events of each process, in seq order."""
        found: dict[str, list[StoredEvent]] = {}
        for batch in chunks(dict.fromkeys(process_ids)):
            ranked = (
                select(
                    E,
                    func.row_number()
                    .over(partition_by=E.c.process_id, order_by=E.c.seq.desc())
                    .label("rank"),
                )
                .where(E.c.process_id.in_(batch))
                .subquery()
            )
            stmt = (
                select(*[ranked.c[c.name] for c in E.c])
                .where(ranked.c.rank <= n)
                .order_by(ranked.c.process_id, ranked.c.seq)
            )
            for row in await self.session.execute(stmt):
                found.setdefault(row.process_id, []).append(_record(row))
        return found

    async def count(self, process_id: str) -> int:
        """How many events `process_id` has."""
        stmt = select(func.count()).select_from(E).where(E.c.process_id == process_id)
        return int((await self.session.execute(stmt)).scalar_one())

    async def by_ids(self, ids: Iterable[int]) -> dict[int, StoredEvent]:
        """Batch loader: events by row id."""
        found: dict[int, StoredEvent] = {}
        for batch in chunks(dict.fromkeys(ids)):
            for row in await self.session.execute(select(E).where(E.c.id.in_(batch))):
                found[row.id] = _record(row)
        return found

    async def scan(self, *, after_id: int = 0, limit: int = 1000) -> list[StoredEvent]:
        """All events in insertion order, keyset-paged by row id (export, analytics)."""
        stmt = select(E).where(E.c.id > after_id).order_by(E.c.id).limit(limit)
        return [_record(r) for r in await self.session.execute(stmt)]
