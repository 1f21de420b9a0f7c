"""The write buffer of a group-commit batch (SQLite): queued process updates and event
inserts go out as one statement each, before any other statement, and a refused queued
row is `BufferedWriteFailed` (never blamed on whichever statement came next)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from persistence_factories import at, new_event, new_process
from sqlalchemy import event

from stateward.persistence import UnitOfWorkFactory
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
        assert seen[:2] == ["UPDATE processes", "INSERT events"]
        assert all(s.id is not None for s in stored)
        more = await uow.events.append(new_event(records[1].id, 2), at(2), defer=True)
        await uow.commit()
    assert more.id is not None and more.id > max(s.id for s in stored)  # type: ignore[type-var]
    assert seen.count("UPDATE processes") == 1 and seen.count("INSERT events") == 2
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
