"""The write buffer of a group-commit batch (SQLite): queued process updates and event
inserts go out as one statement each, before any other statement, and a refused queued
row is `BufferedWriteFailed` (never blamed on whichever statement came next)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from persistence_factories import at, new_event, new_process
from sqlalchemy import event

from stateward.persistence import UnitOfWorkFactory, writebuffer
from stateward.persistence.writebuffer import BufferedWriteFailed


async def _stored(uow_factory: UnitOfWorkFactory, n: int) -> list[Any]:
    records = [new_process() for _ in range(n)]
    async with uow_factory() as uow:
        for record in records:
            await uow.processes.add(record)
        await uow.commit()
    return records


def _statements(uow: Any) -> list[str]:
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.startswith("BEGIN"):
            return
        seen.append(statement.split()[0] + " " + statement.split()[2 if "INTO" in statement else 1])

    event.listen(uow.session.sync_session.get_bind(), "before_cursor_execute", record)
    return seen


async def test_queued_rows_go_out_together_and_before_any_other_statement(
    uow_factory: UnitOfWorkFactory,
) -> None:
    records = await _stored(uow_factory, 5)
    before = dict(writebuffer.stats)
    async with uow_factory() as uow:
        if not uow.buffer_writes():
            pytest.skip("the write buffer is SQLite's (PostgreSQL: unchanged path)")
        seen = _statements(uow)
        stored = []
        for record in records:
            stored.append(await uow.events.append(new_event(record.id, 1), at(1), defer=True))
            await uow.processes.update(replace(record, seq=1, state="s1"), expected_seq=0)
        assert seen == [] and all(s.id is None for s in stored)  # nothing sent yet
        # any other statement sees the queued rows: they are sent first
        assert (await uow.processes.get(records[0].id)).state == "s1"  # type: ignore[union-attr]
        # envelopes stored already are looked for first (`writebuffer.AlreadyStored`)
        # (the data rows after the process rows: these records were written by another
        # unit of work, so their data is written again, as an event that changed it)
        assert seen[:4] == [
            "SELECT identity,", "UPDATE processes", "UPDATE process_data", "INSERT events"
        ]  # fmt: skip
        assert all(s.id is not None for s in stored)
        more = await uow.events.append(new_event(records[1].id, 2), at(2), defer=True)
        await uow.commit()
    assert more.id is not None and more.id > max(s.id for s in stored)  # type: ignore[type-var]
    # the row queued after the SELECT goes out with the commit's tail, on the driver's
    # thread in one round trip (`persistence/tail.py`), not through SQLAlchemy
    assert seen.count("UPDATE processes") == 1 and seen.count("INSERT events") == 1
    assert writebuffer.stats["flushes"] - before["flushes"] == 2
    assert writebuffer.stats["events"] - before["events"] == 6
    async with uow_factory(readonly=True) as uow:
        assert [e.seq for e in await uow.events.for_process(records[1].id)] == [1, 2]


async def test_a_refused_queued_row_fails_the_flush_not_the_next_statement(
    uow_factory: UnitOfWorkFactory,
) -> None:
    [record] = await _stored(uow_factory, 1)
    async with uow_factory() as uow:
        if not uow.buffer_writes():
            pytest.skip("the write buffer is SQLite's")
        await uow.processes.update(replace(record, seq=1), expected_seq=7)  # stale seq
        with pytest.raises(BufferedWriteFailed):
            await uow.processes.get(record.id)
    async with uow_factory() as uow:
        uow.buffer_writes()
        await uow.events.append(new_event(record.id, 1, nonce="n"), at(1), defer=True)
        await uow.events.append(new_event(record.id, 2, nonce="n"), at(1), defer=True)
        with pytest.raises(BufferedWriteFailed):  # a reused nonce, found at the commit
            await uow.commit()
    async with uow_factory(readonly=True) as uow:
        assert await uow.events.count(record.id) == 0


async def test_buffered_rows_are_stored_exactly_as_unbuffered_ones(
    uow_factory: UnitOfWorkFactory,
) -> None:
    """The flush binds the queued rows itself (`writebuffer._Plan`: SQLAlchemy's own bind
    processors, a batch's repeated instants bound once): every column of every row is
    stored as the statement-per-row path stores it, NULLs and JSON included."""
    from sqlalchemy import text

    records = await _stored(uow_factory, 4)
    async with uow_factory() as uow:
        if not uow.buffer_writes():
            pytest.skip("the write buffer is SQLite's (PostgreSQL: unchanged path)")
        for record in records[:2]:  # buffered: one UPDATE and one INSERT for both
            await uow.events.append(new_event(record.id, 1), at(1), defer=True)
            await uow.processes.update(replace(record, seq=1, state="s1"), expected_seq=0)
        await uow.commit()
    async with uow_factory() as uow:  # unbuffered: a statement per row
        for record in records[2:]:
            await uow.events.append(new_event(record.id, 1), at(1))
            await uow.processes.update(replace(record, seq=1, state="s1"), expected_seq=0)
        await uow.commit()
    async with uow_factory(readonly=True) as uow:

        async def raw(table: str, key: str, ids: list[str]) -> list[tuple[Any, ...]]:
            rows = await uow.session.execute(
                text(f"SELECT * FROM {table} WHERE {key} IN ({', '.join(map(repr, ids))})")
            )
            return [tuple(v for k, v in r._mapping.items() if k not in _PER_ROW) for r in rows]

        ids = [r.id for r in records]
        events = await raw("events", "process_id", ids)
        processes = await raw("processes", "id", ids)
    assert len(events) == len(processes) == 4
    assert len(set(events)) == 1 and len(set(processes)) == 1, (events, processes)


#: Columns whose values differ from row to row by construction (ids, hashes, nonces).
_PER_ROW = {"id", "process_id", "identity", "nonce", "envelope", "hash", "signature",
            "entry_token_hash", "head_hash"}  # fmt: skip


async def test_several_updates_of_one_process_go_out_as_one_row(
    uow_factory: UnitOfWorkFactory,
) -> None:
    """A batch with several events of one process sends ONE row for it
    (`writebuffer.coalesced`): the last update's values, the data of the last update
    that wrote data (a later "data kept" update keeps it), the row's seq before the batch
    as the expected one — stored exactly as the update-per-event path stores it."""
    from sqlalchemy import text

    records = await _stored(uow_factory, 4)
    steps = [  # (seq, state, data or None = data kept)
        (1, "s1", {"n": 1}), (2, "s2", {"n": 2}), (3, "s3", None), (4, "s4", None),
    ]  # fmt: skip

    async def apply(uow: Any, record: Any) -> None:
        data = record.data
        for seq, state, changed in steps:
            data = changed if changed is not None else data
            await uow.events.append(new_event(record.id, seq), at(seq), defer=True)
            await uow.processes.update(
                replace(record, seq=seq, state=state, data=data, last_event_at=at(seq)),
                expected_seq=seq - 1,
            )

    before = dict(writebuffer.stats)
    async with uow_factory() as uow:
        if not uow.buffer_writes():
            pytest.skip("the write buffer is SQLite's (PostgreSQL: unchanged path)")
        for record in records[:2]:
            await apply(uow, record)
        await uow.commit()
    assert writebuffer.stats["updates"] - before["updates"] == 8  # queued
    # sent: one row per process, and its data row once, with the last data written
    assert writebuffer.stats["update_rows"] - before["update_rows"] == 2 + 2
    async with uow_factory() as uow:  # unbuffered: a statement per update
        for record in records[2:]:
            await apply(uow, record)
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        rows = await uow.session.execute(text("SELECT * FROM processes"))
        stored = {r.id: tuple(v for k, v in r._mapping.items() if k not in _PER_ROW) for r in rows}
        assert len({stored[r.id] for r in records}) == 1, stored
        data = dict((await uow.session.execute(text("SELECT * FROM process_data"))).all())
        assert len({data[r.id] for r in records}) == 1, data
        record = await uow.processes.get(records[0].id)
        assert record is not None and (record.seq, record.state, record.data) == (4, "s4", {"n": 2})
    # a stale expected seq inside a chain is not merged away: the flush refuses it
    [fresh] = await _stored(uow_factory, 1)
    async with uow_factory() as uow:
        uow.buffer_writes()
        await uow.processes.update(replace(fresh, seq=1), expected_seq=0)
        await uow.processes.update(replace(fresh, seq=3), expected_seq=2)
        with pytest.raises(BufferedWriteFailed):
            await uow.commit()


def test_coalesced_keeps_single_updates_and_order() -> None:
    a1 = ("U", {"_id": "a", "_expected_seq": 0, "seq": 1, "state": "x"})
    b1 = ("U", {"_id": "b", "_expected_seq": 5, "seq": 6, "state": "y"})
    a2 = ("U", {"_id": "a", "_expected_seq": 1, "seq": 2, "state": "z"})
    c1 = ("U", {"_id": "c", "_expected_seq": 0, "seq": 1, "state": "w"})
    assert writebuffer.coalesced([a1, b1, c1]) == [a1, b1, c1]
    assert writebuffer.coalesced([a1, b1, a2, c1]) == [
        ("U", {"_id": "a", "_expected_seq": 0, "seq": 2, "state": "z"}), b1, c1,
    ]  # fmt: skip
    broken = ("U", {"_id": "a", "_expected_seq": 7, "seq": 8, "state": "v"})
    assert writebuffer.coalesced([a1, b1, broken]) == [a1, b1, broken]
