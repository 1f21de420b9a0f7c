"""Processes (registries and instances): load, insert, optimistic update, batch loaders."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, insert, select, update

from stateward.persistence.base import Repository, chunks, to_record
from stateward.persistence.errors import LockOrderError, SeqConflict
from stateward.persistence.models import Process
from stateward.persistence.models_ops import Assignment
from stateward.persistence.writebuffer import INDEPENDENT, buffer_of
from stateward.records import INSTANCE, REGISTRY, ProcessRecord

#: Plain table (Core): rows, not identity-mapped objects that could go stale.
P = cast(Table, Process.__table__)
_COLUMNS = tuple(f.name for f in fields(ProcessRecord))
_MUTABLE = tuple(c for c in _COLUMNS if c not in ("id", "kind", "created_at", "instance_metadata"))
#: `session.info` key: the process rows this transaction holds `FOR UPDATE` (PostgreSQL).
HELD_INFO = "stateward.held_processes"
# Hot-path statements built once (compiled once, executed with parameters).
_INSERT = insert(P)
UPDATE = (
    update(P)
    .where(P.c.id == bindparam("_id"), P.c.seq == bindparam("_expected_seq"))
    .values({c: bindparam(c, type_=P.c[c].type) for c in _MUTABLE})
)


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
    """Reads and writes `processes` rows as `ProcessRecord`s."""

    async def add(self, record: ProcessRecord) -> None:
        """Insert a new process (its first event is appended after it, same transaction).
        The new row is this transaction's alone (no other sees it before COMMIT), so it
        counts as held: locking it later is no step out of the lock order."""
        await self.session.execute(_INSERT, {c: getattr(record, c) for c in _COLUMNS})
        if self.dialect == "postgresql":
            self.session.info.setdefault(HELD_INFO, set()).add(record.id)

    async def get(self, process_id: str, *, for_update: bool = False) -> ProcessRecord | None:
        """The process `process_id`, or None. `for_update` locks the row on PostgreSQL
        (checked against the lock order: see `lock`)."""
        stmt = select(P).where(Process.id == process_id)
        locking = for_update and self.dialect == "postgresql"
        if locking:
            stmt = stmt.with_for_update()
        row = (await self.session.execute(stmt)).one_or_none()
        if row is None:
            return None
        if locking:
            self._held([row.id])
        return process_record(row)

    async def update(self, record: ProcessRecord, expected_seq: int) -> None:
        """Write every mutable column of `record` if the row is still at `expected_seq`.

        Raises `SeqConflict` when another transaction moved the process on first.
        """
        params = {c: getattr(record, c) for c in _MUTABLE}
        params.update(_id=record.id, _expected_seq=expected_seq)
        buffer = buffer_of(self.session)
        if buffer is not None:  # sent with the batch's others (`writebuffer`)
            buffer.updates.append(params)
            return
        result = await self.session.execute(UPDATE, params)
        if result.rowcount != 1:  # type: ignore[attr-defined]
            raise SeqConflict(
                f"process {record.id} is no longer at seq {expected_seq}", process_id=record.id
            )

    async def next_seq(self, process_id: str) -> int:
        """The seq the next event of `process_id` takes (1 for a process not stored yet)."""
        stmt = select(Process.seq).where(Process.id == process_id)
        seq = (await self.session.execute(stmt)).scalar_one_or_none()
        return 1 if seq is None else seq + 1

    async def processes_by_ids(self, ids: Iterable[str]) -> dict[str, ProcessRecord]:
        """Batch loader: the processes among `ids` that exist, by id."""
        found: dict[str, ProcessRecord] = {}
        for batch in chunks(dict.fromkeys(ids)):
            rows = await self.session.execute(select(P).where(Process.id.in_(batch)))
            found.update({r.id: process_record(r) for r in rows})
        return found

    async def lock(self, ids: Iterable[str]) -> dict[str, ProcessRecord]:
        """Lock the existing processes among `ids` and return them, by id.

        Step 1 of the lock order (`persistence/sequencer.py`): a transaction that writes
        several processes locks all of them first, `FOR UPDATE` in ascending id order, so
        two transactions never hold one row each while waiting for the other's. On
        SQLite (one writer at a time) this is a plain read.
        """
        ordered = sorted(set(ids))
        found: dict[str, ProcessRecord] = {}
        locking = self.dialect == "postgresql"
        for batch in chunks(ordered):
            stmt = select(P).where(Process.id.in_(batch)).order_by(P.c.id)
            if locking:
                stmt = stmt.with_for_update()
            rows = await self.session.execute(stmt)
            found.update({r.id: process_record(r) for r in rows})
        if locking:
            self._held(found)
        return found

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
            stmt = (
                select(P)
                .where(Process.parent_id.in_(batch))
                .order_by(Process.created_at, Process.id)
            )
            for row in await self.session.execute(stmt):
                found.setdefault(row.parent_id or "", []).append(process_record(row))
        return found

    async def by_entry_token(self, token_hash: str) -> ProcessRecord | None:
        """The instance whose entry token hashes to `token_hash`, or None."""
        stmt = select(P).where(Process.entry_token_hash == token_hash)
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
        stmt = select(P).order_by(Process.created_at, Process.id).limit(limit)
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
