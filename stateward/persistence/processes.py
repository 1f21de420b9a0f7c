"""Processes (registries and instances): load, insert, optimistic update, batch loaders."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, Text, bindparam, func, insert, select, update
from sqlalchemy import cast as sql_cast

from stateward.persistence.access import GENERATION_VALUE, note_generation
from stateward.persistence.base import Repository, chunks, to_record
from stateward.persistence.db import loads_json
from stateward.persistence.errors import LockOrderError, SeqConflict
from stateward.persistence.jsonparts import FragmentMemo, dump_whole
from stateward.persistence.models import Process, ProcessData
from stateward.persistence.models_ops import Assignment
from stateward.persistence.types import JsonText
from stateward.persistence.writebuffer import INDEPENDENT, buffer_of
from stateward.records import INSTANCE, REGISTRY, ProcessRecord

#: Plain tables (Core): rows, not identity-mapped objects that could go stale.
P = cast(Table, Process.__table__)
#: Each process's data, one row per process (`models.ProcessData`).
D = cast(Table, ProcessData.__table__)
_COLUMNS = tuple(f.name for f in fields(ProcessRecord))
#: Columns an event may change in the `processes` row. Not `parent_id` (fixed when the
#: process starts): on SQLite an UPDATE that sets a column of a foreign key to its own
#: table deletes and reinserts the row. The data is in `process_data`.
_MUTABLE = tuple(
    c
    for c in _COLUMNS
    if c not in ("id", "kind", "created_at", "instance_metadata", "parent_id", "data")
)
#: `session.info` key: the process rows this transaction holds `FOR UPDATE` (PostgreSQL).
HELD_INFO = "stateward.held_processes"
#: A process row with its data (`data` from `process_data`): what readers select from.
WITH_DATA = P.join(D, D.c.process_id == P.c.id)
#: Every column of a process, its data included (select_from `WITH_DATA`).
RECORD_COLUMNS = (*P.c, D.c.data)
# Hot-path statements built once (compiled once, executed with parameters).
_INSERT = insert(P)
_INSERT_DATA = insert(D)
#: Processes with their data (`process_record` maps its rows); add the WHERE.
SELECT_PROCESSES = select(*RECORD_COLUMNS).select_from(WITH_DATA)
UPDATE = (
    update(P)
    .where(P.c.id == bindparam("_id"), P.c.seq == bindparam("_expected_seq"))
    .values({c: bindparam(c, type_=P.c[c].type) for c in _MUTABLE})
)
#: The new data of a process (an event that changed it; sent after its `UPDATE`).
UPDATE_DATA = (
    update(D)
    .where(D.c.process_id == bindparam("_id"))
    .values(data=bindparam("data", type_=D.c.data.type))
)
#: `UPDATE` and `UPDATE_DATA` in one statement (PostgreSQL: one round trip): the data
#: row is written only when the process row was still at the expected seq, and the
#: statement's row count is the process row's (1, or 0 when another writer moved on).
_MOVED = UPDATE.returning(P.c.id).cte("moved")
UPDATE_WITH_DATA = (
    update(D)
    .where(D.c.process_id == _MOVED.c.id)
    .values(data=bindparam("data", type_=D.c.data.type))
)
#: Bytes of JSON text the process data cache keeps per unit-of-work factory (about five
#: times as much in Python objects): 16 MiB holds 250 instances of 64 KB.
DATA_CACHE_BYTES = 16 * 1024 * 1024

_IDS: Any = bindparam("_ids", expanding=True)
#: The process rows of the ids bound as `_ids`, in id order, without their data (`FOR
#: UPDATE` or not), built once: a statement built per call cost its construction and
#: cache key every time, and its `IN` list's bound parameter was left in a reference
#: cycle for the collector (once per group-commit batch).
_ROWS_BY_ID = select(P).where(P.c.id.in_(_IDS)).order_by(P.c.id)
#: SQLite's locked read carries the grants generation besides (`access.note_generation`):
#: the batch's first key status or role lookup then makes no round trip of its own.
_ROWS_WITH_GENERATION = _ROWS_BY_ID.add_columns(GENERATION_VALUE)
_LOCKED_READS = {False: _ROWS_WITH_GENERATION, True: _ROWS_BY_ID.with_for_update()}
#: The data of the process ids bound as `_ids`, as JSON text (its length is the size
#: the `DataCache` counts).
_DATA_READ = select(D.c.process_id, sql_cast(D.c.data, Text).label("data")).where(
    D.c.process_id.in_(_IDS)
)
#: The batch loaders' reads (processes by id, children by parent), built once as the
#: locked read is.
_BY_IDS = SELECT_PROCESSES.where(P.c.id.in_(_IDS))
_BY_PARENTS = SELECT_PROCESSES.where(P.c.parent_id.in_(_IDS)).order_by(P.c.created_at, P.c.id)


class DataCache:
    """Parsed instance data as committed, by process id and `head_hash` (shared by the
    units of work of one factory: one runtime).

    A process's data is a function of its event log (`verify` replays it), and its
    `head_hash` is the hash chain over that log, so (id, head_hash) names one value of
    the data for good, on every node of one database. A locked read of process rows
    (`ProcessRepository.lock`, `get(for_update=True)`) reads the data of only those rows
    whose key is not the cached one, in a second statement made after the rows are
    locked (so on PostgreSQL it sees the data committed with the row it locked: a row
    another node moved on has another head_hash, and its data is read). Entries come
    from rows a unit of work read or wrote, and enter the cache only when that unit of
    work commits (a rolled-back write is never served). Cached values are shared, never
    copied: nothing may mutate process data in place (the domain copies on write,
    `domain/mutations.py`). Least recently used entries leave past `budget` bytes of
    JSON text.
    """

    def __init__(self, budget: int = DATA_CACHE_BYTES) -> None:
        self.budget = budget
        self._entries: OrderedDict[str, tuple[str, dict[str, Any], int]] = OrderedDict()
        self._size = 0
        #: The JSON text of large top-level values, reused when an update keeps them.
        self.parts = FragmentMemo(budget)
        #: Locked reads that found their data here / had to read it (tests and the bench).
        self.hits = 0
        self.misses = 0

    def known(self, ids: Iterable[str]) -> dict[str, tuple[dict[str, Any], int]]:
        """(data, size) cached for `ids`, by row key `id:head_hash` (a snapshot: entries
        may change while the statement that uses it runs)."""
        found = {}
        for i in ids:
            entry = self._entries.get(i)
            if entry is not None:
                self._entries.move_to_end(i)
                found[f"{i}:{entry[0]}"] = (entry[1], entry[2])
        return found

    def put(self, process_id: str, head_hash: str, data: dict[str, Any], size: int) -> None:
        """Remember `data` as the committed data of `process_id` at `head_hash`."""
        old = self._entries.pop(process_id, None)
        if old is not None:
            self._size -= old[2]
        if size > self.budget:
            return
        self._entries[process_id] = (head_hash, data, size)
        self._size += size
        while self._size > self.budget:
            _, (_, _, dropped) = self._entries.popitem(last=False)
            self._size -= dropped

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class ProcessFilter:
    """Which instances a listing wants (None = any). `kind` defaults to instances."""

    namespace: str | None = None
    workflow: str | None = None
    state: str | None = None
    status: str | None = None
    parent_id: str | None = None
    kind: str | None = INSTANCE


def process_record(row: Any) -> ProcessRecord:
    """Map a `processes` row to its record (data always a dict)."""
    record = to_record(ProcessRecord, row)
    return record if isinstance(record.data, dict) else _with_dict_data(record)


def _with_dict_data(record: ProcessRecord) -> ProcessRecord:
    values = asdict(record)
    values["data"] = dict(record.data or {})
    return ProcessRecord(**values)


class ProcessRepository(Repository):
    """Reads and writes processes (`processes` rows with their `process_data` row) as
    `ProcessRecord`s.

    With a `DataCache` (the unit of work's factory passes its own), locked reads take
    the data they already hold from it, and what this transaction read and wrote enters
    it at commit (`committed`). `update` leaves the data row alone when the event did
    not change the data this transaction read or wrote for that process and seq."""

    def __init__(self, session: Any, cache: DataCache | None = None) -> None:
        super().__init__(session)
        self.cache = cache
        #: (id) -> (head_hash, data, size of its JSON text): read or written here.
        self._pending: dict[str, tuple[str, dict[str, Any], int]] = {}
        #: (id) -> (seq, data, size of its JSON text) as this transaction last read or
        #: wrote the row.
        self._seen: dict[str, tuple[int, dict[str, Any], int]] = {}

    def committed(self) -> None:
        """The transaction committed: what it read and wrote is the rows' data now."""
        pending, self._pending = self._pending, {}
        self._seen.clear()
        if self.cache is not None:
            for process_id, (head_hash, data, size) in pending.items():
                self.cache.put(process_id, head_hash, data, size)

    @property
    def _pads(self) -> bool:
        """Large data is stored padded to keep the row's length through small edits: on
        SQLite only (jsonb keeps no whitespace; `jsonparts.padded_length`)."""
        return self.dialect == "sqlite"

    async def add(self, record: ProcessRecord) -> None:
        """Insert a new process (its first event is appended after it, same transaction).
        The new row is this transaction's alone (no other sees it before COMMIT), so it
        counts as held: locking it later is no step out of the lock order."""
        params = {c: getattr(record, c) for c in _COLUMNS if c != "data"}
        text = JsonText(dump_whole(record.data, 0, pad=self._pads))
        await self.session.execute(_INSERT, params)
        await self.session.execute(_INSERT_DATA, {"process_id": record.id, "data": text})
        self._seen[record.id] = (record.seq, record.data, len(text))
        if record.head_hash is not None:
            self._pending[record.id] = (record.head_hash, record.data, len(text))
        if self.dialect == "postgresql":
            self.session.info.setdefault(HELD_INFO, set()).add(record.id)

    async def get(self, process_id: str, *, for_update: bool = False) -> ProcessRecord | None:
        """The process `process_id`, or None. `for_update` locks the row on PostgreSQL
        (checked against the lock order: see `lock`)."""
        if for_update:
            return (await self._read_locked([process_id])).get(process_id)
        stmt = SELECT_PROCESSES.where(P.c.id == process_id)
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else process_record(row)

    async def update(self, record: ProcessRecord, expected_seq: int) -> None:
        """Write every mutable column of `record` if the row is still at `expected_seq`,
        and its data when the event changed it.

        Raises `SeqConflict` when another transaction moved the process on first.
        """
        params = {c: getattr(record, c) for c in _MUTABLE}
        params.update(_id=record.id, _expected_seq=expected_seq)
        seen = self._seen.get(record.id)
        keep = seen is not None and seen[0] == expected_seq and seen[1] == record.data
        text: JsonText | None = None
        if keep:
            assert seen is not None
            size = seen[2]
        else:
            if self.cache is not None and seen is not None:  # large values' text reused
                dumped = self.cache.parts.dump(record.id, record.data, seen[2], pad=self._pads)
            else:
                previous = seen[2] if seen is not None else 0
                dumped = dump_whole(record.data, previous, pad=self._pads)
            text = JsonText(dumped)
            size = len(text)
        self._seen[record.id] = (record.seq, record.data, size)
        if record.head_hash is not None:
            self._pending[record.id] = (record.head_hash, record.data, size)
        else:
            self._pending.pop(record.id, None)
        buffer = buffer_of(self.session)
        if buffer is not None:  # sent with the batch's others (`writebuffer`)
            buffer.updates.append((UPDATE, params))
            if text is not None:
                buffer.latest[UPDATE_DATA, record.id] = {"_id": record.id, "data": text}
            return
        joined = text is not None and self.dialect == "postgresql"  # both rows, one trip
        result = await self.session.execute(
            UPDATE_WITH_DATA if joined else UPDATE, {**params, "data": text} if joined else params
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            raise SeqConflict(
                f"process {record.id} is no longer at seq {expected_seq}", process_id=record.id
            )
        if text is not None and not joined:  # SQLite: the data row after its process row
            await self.session.execute(UPDATE_DATA, {"_id": record.id, "data": text})

    async def next_seq(self, process_id: str) -> int:
        """The seq the next event of `process_id` takes (1 for a process not stored yet)."""
        stmt = select(Process.seq).where(Process.id == process_id)
        seq = (await self.session.execute(stmt)).scalar_one_or_none()
        return 1 if seq is None else seq + 1

    async def processes_by_ids(self, ids: Iterable[str]) -> dict[str, ProcessRecord]:
        """Batch loader: the processes among `ids` that exist, by id."""
        found: dict[str, ProcessRecord] = {}
        for batch in chunks(dict.fromkeys(ids)):
            rows = await self.session.execute(_BY_IDS, {"_ids": batch})
            found.update({r.id: process_record(r) for r in rows})
        return found

    async def lock(self, ids: Iterable[str]) -> dict[str, ProcessRecord]:
        """Lock the existing processes among `ids` and return them, by id.

        Step 1 of the lock order (`persistence/sequencer.py`): a transaction that writes
        several processes locks all of them first, `FOR UPDATE` in ascending id order, so
        two transactions never hold one row each while waiting for the other's. On
        SQLite (one writer at a time) this is a plain read.
        """
        return await self._read_locked(sorted(set(ids)))

    async def _read_locked(self, ordered: list[str]) -> dict[str, ProcessRecord]:
        """`lock` of ids already sorted: the process rows in one statement, then the data
        of those whose data the cache does not hold at the row's head (`DataCache`) in
        a second one. Made after the rows are locked, that read sees the data committed
        with the rows it locked (on PostgreSQL a statement's snapshot is taken when it
        starts: a join read in the locking statement could pair the newest process row
        with the data of the snapshot before it)."""
        found: dict[str, ProcessRecord] = {}
        locking = self.dialect == "postgresql"
        stmt = _LOCKED_READS[locking]
        for batch in chunks(ordered):
            rows = (await self.session.execute(stmt, {"_ids": batch})).all()
            if rows and not locking:
                note_generation(self.session, rows[0].grants_generation)
            known = self.cache.known(batch) if self.cache is not None else {}
            missing = [r.id for r in rows if f"{r.id}:{r.head_hash}" not in known]
            texts: dict[str, str] = {}
            if missing:
                read = await self.session.execute(_DATA_READ, {"_ids": missing})
                texts = {process_id: text for process_id, text in read}
            for row in rows:
                found[row.id] = self._locked_record(row, known, texts)
        if locking:
            self._held(found)
        return found

    def _locked_record(
        self, row: Any, known: dict[str, tuple[dict[str, Any], int]], texts: dict[str, str]
    ) -> ProcessRecord:
        """The record of a locked process row: its data from the cache (`known`, by row
        key) or parsed from `texts` (read for the rows the cache did not hold)."""
        values = row._asdict()
        values.pop("grants_generation", None)
        hit = known.get(f"{row.id}:{row.head_hash}")
        if hit is not None:
            data, size = hit
            if self.cache is not None:
                self.cache.hits += 1
        else:
            text = texts.get(row.id)
            if text is None:
                raise LookupError(f"process {row.id} has no process_data row")
            if self.cache is not None:
                self.cache.misses += 1
            parsed = loads_json(text)
            data = parsed if isinstance(parsed, dict) else dict(parsed or {})
            size = len(text)
            if row.head_hash is not None:
                self._pending[row.id] = (row.head_hash, data, size)
        values["data"] = data
        self._seen[row.id] = (row.seq, data, size)
        return ProcessRecord(**values)

    def _held(self, ids: Iterable[str]) -> None:
        """Note process rows this transaction now holds `FOR UPDATE`; raise
        `LockOrderError` when one of them was not held yet and sorts before a row that
        already was (the ascending-id rule of the lock order was broken: a possible
        deadlock, so a bug). Rows already held cost nothing to lock again."""
        held: set[str] = self.session.info.setdefault(HELD_INFO, set())
        new = sorted(set(ids) - held)
        if new and held and new[0] < max(held):
            raise LockOrderError(
                f"process row {new[0]} locked after {max(held)}: process rows are locked "
                "in ascending id order, all at the start of the transaction"
            )
        held.update(new)

    async def children_by_parents(
        self, parent_ids: Iterable[str]
    ) -> dict[str, list[ProcessRecord]]:
        """Batch loader: the children of each parent, oldest first."""
        found: dict[str, list[ProcessRecord]] = {}
        for batch in chunks(dict.fromkeys(parent_ids)):
            for row in await self.session.execute(_BY_PARENTS, {"_ids": batch}):
                found.setdefault(row.parent_id or "", []).append(process_record(row))
        return found

    async def by_entry_token(self, token_hash: str) -> ProcessRecord | None:
        """The instance whose entry token hashes to `token_hash`, or None."""
        stmt = SELECT_PROCESSES.where(Process.entry_token_hash == token_hash)
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else process_record(row)

    async def claimed_by(self, process_id: str) -> str | None:
        """The assignee of the process's open claimed assignment, if any."""
        stmt = select(Assignment.assignee).where(
            Assignment.process_id == process_id, Assignment.status == "claimed"
        )
        stmt = stmt.limit(1).execution_options(**{INDEPENDENT: True})
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def find(
        self,
        where: ProcessFilter = ProcessFilter(),
        *,
        after: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> list[ProcessRecord]:
        """Processes matching `where`, oldest first, keyset-paged after (created_at, id)."""
        stmt = SELECT_PROCESSES.order_by(Process.created_at, Process.id).limit(limit)
        for column, value in (
            (Process.namespace, where.namespace),
            (Process.workflow, where.workflow),
            (Process.state, where.state),
            (Process.status, where.status),
            (Process.parent_id, where.parent_id),
            (Process.kind, where.kind),
        ):
            if value is not None:
                stmt = stmt.where(column == value)
        if after is not None:
            created, pid = after
            stmt = stmt.where(
                (Process.created_at > created)
                | ((Process.created_at == created) & (Process.id > pid))
            )
        return [process_record(r) for r in (await self.session.execute(stmt))]

    async def count(self, where: ProcessFilter = ProcessFilter()) -> int:
        """How many processes match `where`."""
        stmt = select(func.count()).select_from(Process)
        for column, value in (
            (Process.namespace, where.namespace),
            (Process.workflow, where.workflow),
            (Process.state, where.state),
            (Process.status, where.status),
            (Process.parent_id, where.parent_id),
            (Process.kind, where.kind),
        ):
            if value is not None:
                stmt = stmt.where(column == value)
        return int((await self.session.execute(stmt)).scalar_one())

    async def registry_namespaces(self) -> list[str]:
        """Namespaces that have a registry process, sorted."""
        stmt = select(Process.namespace).where(Process.kind == REGISTRY).order_by(Process.namespace)
        return list((await self.session.execute(stmt)).scalars())

    async def all_ids(self, kinds: Sequence[str] = (REGISTRY, INSTANCE)) -> list[str]:
        """Every process id of the given kinds, oldest first (for `verify`, `export`)."""
        stmt = (
            select(Process.id)
            .where(Process.kind.in_(list(kinds)))
            .order_by(Process.created_at, Process.id)
        )
        return list((await self.session.execute(stmt)).scalars())
