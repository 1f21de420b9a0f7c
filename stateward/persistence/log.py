"""The deployment log: log indexes, the Merkle tree's stored nodes, and checkpoints.

`EventRepository.append` queues each new event on the session (`queue_leaf`); the
sequencing step of the commit (`LogRepository.sequence`, called by `UnitOfWork.commit`
just before COMMIT) takes the global sequencing lock, reads the one head row, gives the
queued events the next log indexes in order, stores their leaves and the perfect
subtrees they complete (O(log n) per leaf, amortised two) and writes the new head. So
log indexes are gap-free and follow commit order across nodes and group commit.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, cast

from sqlalchemy import Table, func, insert, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from stateward.domain import merkle
from stateward.domain.logformat import event_leaf
from stateward.persistence.base import CHUNK, Repository, chunks, to_record
from stateward.persistence.models import Event
from stateward.persistence.models_log import Checkpoint, LogHead, LogNode
from stateward.persistence.outbox import take_sequence_lock
from stateward.records import CheckpointRecord, StoredEvent

N = cast(Table, LogNode.__table__)
H = cast(Table, LogHead.__table__)
C = cast(Table, Checkpoint.__table__)
E = cast(Table, Event.__table__)
PENDING = "stateward.log_pending"
#: The last head this process wrote, per engine: (size, frontier JSON). A guess only:
#: the head is updated on the condition that it still holds, else read again.
_HEADS: weakref.WeakKeyDictionary[Any, tuple[int, str]] = weakref.WeakKeyDictionary()


def queue_leaf(session: AsyncSession, event: StoredEvent) -> None:
    """Remember a new event of this transaction for the sequencing step."""
    session.info.setdefault(PENDING, []).append(event)


#: A new node: (level, idx, 32-byte hash, event id of a leaf else None).
NodeRow = tuple[int, int, bytes, int | None]
#: The SQLite path's statements, sent through the driver connection (see `sequence`).
_SQLITE_GUARDED_HEAD = (
    "UPDATE log_head SET size = ?, frontier = ? WHERE id = 1 AND size = ? AND frontier = ?"
)
_SQLITE_HEAD = "UPDATE log_head SET size = ?, frontier = ? WHERE id = 1"
_SQLITE_NODES = "INSERT INTO log_nodes (level, idx, hash, event_id) VALUES (?, ?, ?, ?)"


def _grow(
    size: int, frontier_json: str, events: list[StoredEvent]
) -> tuple[int, str, list[NodeRow]]:
    """The new head and the node rows after appending `events` to (size, frontier)."""
    frontier = [bytes.fromhex(h) for h in json.loads(frontier_json)]
    rows: list[NodeRow] = []
    for event in events:
        leaf = event_leaf(event.process_id, event.seq, event.signer, event.hash)
        frontier, created = merkle.append(frontier, size, leaf)
        rows.extend((lv, ix, h, None if lv else event.id) for lv, ix, h in created)
        size += 1
    return size, json.dumps([h.hex() for h in frontier]), rows


def sqlite_step(
    conn: Any, pending: list[StoredEvent], guess: tuple[int, str] | None
) -> tuple[int, int, str]:
    """The log's step on SQLite through a plain `sqlite3` connection (sync: on
    aiosqlite's thread, inside the transaction that holds the write lock): the head
    updated on the condition that it is still `guess` (this process's last), else read
    and updated; then the new nodes. (old size, new size, new frontier JSON)."""
    moved = True
    if guess is not None:
        size, frontier = guess
        new_size, new_frontier, rows = _grow(size, frontier, pending)
        cursor = conn.execute(_SQLITE_GUARDED_HEAD, (new_size, new_frontier, size, frontier))
        moved = cursor.rowcount != 1
    if moved:
        head = conn.execute("SELECT size, frontier FROM log_head WHERE id = 1").fetchone()
        size = int(head[0])
        new_size, new_frontier, rows = _grow(size, head[1], pending)
        conn.execute(_SQLITE_HEAD, (new_size, new_frontier))
    conn.executemany(_SQLITE_NODES, rows)
    return size, new_size, new_frontier


def _as_dicts(rows: list[NodeRow]) -> list[dict[str, Any]]:
    return [{"level": lv, "idx": ix, "hash": h, "event_id": ev} for lv, ix, h, ev in rows]


class LogRepository(Repository):
    """Appends to the deployment log and reads its tree, leaves and checkpoints."""

    async def sequence(self) -> list[int]:
        """Append the events queued in this transaction (see the module docstring);
        returns their log indexes. Call last, just before COMMIT.

        Two statements in the steady state: the head is updated on the condition that it
        is still the one this process wrote last (same size and frontier), then the new
        nodes are inserted; when another writer moved it, the head is read first.
        (PostgreSQL's commit sends the same in one request: `onetrip`.)"""
        pending: list[StoredEvent] = self.session.info.pop(PENDING, None) or []
        if not pending:
            return []
        engine = self.session.get_bind()
        if engine.dialect.name == "sqlite":
            size, new_size, new_frontier = await self._sequence_sqlite(engine, pending)
            _HEADS[engine] = (new_size, new_frontier)
            return list(range(size, new_size))
        await take_sequence_lock(self.session)
        guess = _HEADS.get(engine)
        moved = True
        if guess is not None:
            size, frontier = guess
            new_size, new_frontier, rows = _grow(size, frontier, pending)
            stmt = (
                update(H)
                .where(H.c.id == 1, H.c.size == size, H.c.frontier == frontier)
                .values(size=new_size, frontier=new_frontier)
            )
            moved = (await self.session.execute(stmt)).rowcount != 1  # type: ignore[attr-defined]
        if moved:
            row = (
                await self.session.execute(select(H.c.size, H.c.frontier).where(H.c.id == 1))
            ).one()
            size = int(row.size)
            new_size, new_frontier, rows = _grow(size, row.frontier, pending)
            await self.session.execute(
                update(H).where(H.c.id == 1).values(size=new_size, frontier=new_frontier)
            )
        await self.session.execute(insert(N), _as_dicts(rows))
        _HEADS[engine] = (new_size, new_frontier)
        return list(range(size, new_size))

    async def _sequence_sqlite(
        self, engine: Any, pending: list[StoredEvent]
    ) -> tuple[int, int, str]:
        """`sequence` on SQLite: the statements of `sqlite_step`, run on the driver
        connection's thread (aiosqlite) in one round trip, inside the transaction that
        holds the write lock (BEGIN IMMEDIATE). Through the session each statement cost
        more Python than SQLite's own work, and the log's step is a fixed cost of every
        group-commit batch. (old size, new size, new frontier JSON)."""
        connection = await self.session.connection()
        driver: Any = (await connection.get_raw_connection()).driver_connection
        step: tuple[int, int, str] = await driver._execute(
            sqlite_step, driver._conn, pending, _HEADS.get(engine)
        )
        return step

    async def head(self) -> tuple[int, str]:
        """(size, root hex) of the committed tree."""
        row = (await self.session.execute(select(H.c.size, H.c.frontier).where(H.c.id == 1))).one()
        frontier = [bytes.fromhex(h) for h in json.loads(row.frontier)]
        return int(row.size), merkle.root_from_frontier(frontier).hex()

    async def nodes(self, ids: Iterable[merkle.NodeId]) -> dict[merkle.NodeId, bytes]:
        """Stored perfect subtrees by (level, index); level 0 are the leaves."""
        wanted = sorted(set(ids))
        found: dict[merkle.NodeId, bytes] = {}
        step = CHUNK // 2
        for start in range(0, len(wanted), step):
            stmt = select(N.c.level, N.c.idx, N.c.hash).where(
                tuple_(N.c.level, N.c.idx).in_(wanted[start : start + step])
            )
            for r in await self.session.execute(stmt):
                found[(int(r.level), int(r.idx))] = bytes(r.hash)
        return found

    async def root_at(self, size: int) -> str:
        """The root (hex) of the tree over the first `size` leaves (size <= head size)."""
        ids = merkle.frontier_ids(size)
        nodes = await self.nodes(ids)
        return merkle.fold([nodes[i] for i in ids]).hex()

    async def leaf_of(self, process_id: str, seq: int) -> tuple[int, str] | None:
        """(log index, leaf hash hex) of event `seq` of `process_id`, or None."""
        stmt = (
            select(N.c.idx, N.c.hash)
            .join(E, E.c.id == N.c.event_id)
            .where(
                N.c.level == 0,
                N.c.event_id.is_not(None),  # the partial index of the leaves
                E.c.process_id == process_id,
                E.c.seq == seq,
            )
        )
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else (int(row.idx), bytes(row.hash).hex())

    async def events(self, *, after: int = -1, limit: int = 1000) -> list[tuple[int, StoredEvent]]:
        """(log index, event) with index > `after`, in index order (export, verify)."""
        stmt = (
            select(N.c.idx, E)
            .join(E, E.c.id == N.c.event_id)
            .where(N.c.level == 0, N.c.idx > after)
            .order_by(N.c.level, N.c.idx)
            .limit(limit)
        )
        return [(int(r.idx), to_record(StoredEvent, r)) for r in await self.session.execute(stmt)]

    async def unlogged_events(self) -> int:
        """How many event rows have no log leaf (a database edited behind the log): the
        events less the leaves that name an existing event (`event_id` is unique among
        leaves), one pass over each table."""
        events = select(func.count()).select_from(E)
        logged = (
            select(func.count())
            .select_from(N)
            .join(E, E.c.id == N.c.event_id)
            .where(N.c.level == 0, N.c.event_id.is_not(None))
        )
        total = int((await self.session.execute(events)).scalar_one())
        return total - int((await self.session.execute(logged)).scalar_one())

    # ------------------------------------------------------------------ checkpoints

    async def add_checkpoint(self, record: CheckpointRecord) -> CheckpointRecord:
        """Keep a signed checkpoint; returns it with its id."""
        values = {
            k: getattr(record, k) for k in ("size", "root", "ts", "signer", "signature", "body")
        }
        result = await self.session.execute(insert(C).returning(C.c.id), values)
        return CheckpointRecord(id=int(result.scalar_one()), **values)

    async def latest_checkpoint(self, signer: str | None = None) -> CheckpointRecord | None:
        """The newest checkpoint (largest size, then newest), of `signer` when given."""
        stmt = select(C).order_by(C.c.size.desc(), C.c.id.desc()).limit(1)
        if signer is not None:
            stmt = stmt.where(C.c.signer == signer)
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else to_record(CheckpointRecord, row)

    async def checkpoints(
        self, *, after_id: int = 0, limit: int | None = None, newest_first: bool = False,
        before_id: int | None = None,
    ) -> list[CheckpointRecord]:  # fmt: skip
        """Checkpoints with id > `after_id`, oldest first (`newest_first`: those below
        `before_id` when given, newest first, to page backward)."""
        stmt = select(C).where(C.c.id > after_id).order_by(C.c.id)
        if newest_first:
            stmt = select(C).order_by(C.c.id.desc())
            if before_id is not None:
                stmt = stmt.where(C.c.id < before_id)
        if limit is not None:
            stmt = stmt.limit(limit)
        return [to_record(CheckpointRecord, r) for r in await self.session.execute(stmt)]

    async def checkpoint_count(self) -> int:
        """How many checkpoints are kept (`Query.checkpoints.totalCount`)."""
        return int((await self.session.execute(select(func.count()).select_from(C))).scalar_one())

    async def checkpoints_by_ids(self, ids: Iterable[int]) -> Mapping[int, CheckpointRecord]:
        """Checkpoints by id."""
        found: dict[int, CheckpointRecord] = {}
        for batch in chunks(dict.fromkeys(ids)):
            for r in await self.session.execute(select(C).where(C.c.id.in_(batch))):
                found[int(r.id)] = to_record(CheckpointRecord, r)
        return found
