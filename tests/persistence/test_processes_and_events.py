"""Processes and the event log: round trips, optimistic seq, conflicts, batch loaders."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from persistence_factories import T0, at, new_event, new_process

from stateward.domain.model import ProcessSnapshot
from stateward.persistence import (
    NonceConflict,
    SeqConflict,
    UnitOfWorkFactory,
)
from stateward.persistence.errors import LockOrderError
from stateward.persistence.processes import ProcessFilter
from stateward.records import AssignmentRecord


async def _stored(uow_factory: UnitOfWorkFactory, **overrides: object):  # type: ignore[no-untyped-def]
    record = new_process(**overrides)  # type: ignore[arg-type]
    async with uow_factory() as uow:
        await uow.processes.add(record)
        await uow.commit()
    return record


async def test_a_process_round_trips_every_column(uow_factory: UnitOfWorkFactory) -> None:
    parent = await _stored(uow_factory)
    record = new_process(
        data={"state": "intake", "nested": {"n": [1, 2.5, "x", None, True]}, "big": 2**53},
        parent_id=parent.id,
        entry_token_hash="ab" * 32,
        sla_warn_at=at(80),
        sla_due_at=at(100),
        automation_chain=3,
        head_hash="cd" * 32,
    )
    async with uow_factory() as uow:
        await uow.processes.add(record)
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        assert await uow.processes.get(record.id) == record
        assert await uow.processes.by_entry_token("ab" * 32) == record
        children = await uow.processes.children_by_parents([parent.id])
    assert children == {parent.id: [record]}


async def test_snapshot_carries_the_claimed_assignee(uow_factory: UnitOfWorkFactory) -> None:
    record = await _stored(uow_factory, state="review")
    async with uow_factory() as uow:
        await uow.assignments.open(
            AssignmentRecord("as-1", record.id, "review", "analyst", "unassigned", 1, T0)
        )
        assert await uow.assignments.claim_assignment("as-1", "actor-b", at(1))
        claimed_by = await uow.processes.claimed_by(record.id)
        await uow.commit()
    snapshot = record.snapshot(claimed_by=claimed_by)
    assert isinstance(snapshot, ProcessSnapshot)
    assert (snapshot.state, snapshot.claimed_by, snapshot.version) == ("review", "actor-b", 1)


async def test_an_event_and_its_process_update_commit_together(
    uow_factory: UnitOfWorkFactory,
) -> None:
    record = await _stored(uow_factory)
    async with uow_factory() as uow:
        seq = await uow.processes.next_seq(record.id)
        stored = await uow.events.append(new_event(record.id, seq), recorded_at=at(1))
        moved = replace(record, seq=seq, state="review", head_hash=stored.hash, updated_at=at(1))
        await uow.processes.update(moved, expected_seq=record.seq)
        await uow.commit()
    assert stored.id is not None and stored.recorded_at == at(1)
    async with uow_factory(readonly=True) as uow:
        assert await uow.processes.get(record.id) == moved
        assert await uow.events.for_process(record.id) == [stored]
        assert await uow.events.get(record.id, 1) == stored
        key = (stored.identity, stored.actor, stored.nonce)
        assert await uow.events.originals([key]) == {stored.identity: stored}
        # the same (actor, nonce) under another identity is no original: a replay
        replay = ("f" * 64, stored.actor, stored.nonce)
        assert await uow.events.originals([replay]) == {}
        assert await uow.events.originals([replay, key]) == {stored.identity: stored}
        assert await uow.events.originals([key, replay]) == {stored.identity: stored}
        assert await uow.events.by_nonce(stored.actor, stored.nonce) == stored
        assert await uow.processes.next_seq(record.id) == 2


async def test_updating_from_a_stale_seq_raises_seq_conflict(
    uow_factory: UnitOfWorkFactory,
) -> None:
    record = await _stored(uow_factory)
    async with uow_factory() as uow:
        await uow.processes.update(replace(record, seq=1), expected_seq=0)
        await uow.commit()
    async with uow_factory() as uow:
        with pytest.raises(SeqConflict):
            await uow.processes.update(replace(record, seq=1, state="other"), expected_seq=0)


async def test_two_writers_racing_for_one_seq_get_one_seq_conflict(
    uow_factory: UnitOfWorkFactory,
) -> None:
    record = await _stored(uow_factory)
    ready = asyncio.Barrier(2)

    async def writer(actor: str) -> str:
        try:
            async with uow_factory() as uow:
                if uow.dialect == "postgresql":  # both read seq 0 before either writes
                    seq = await uow.processes.next_seq(record.id)
                    await ready.wait()
                else:  # SQLite serialises writers at BEGIN IMMEDIATE: simulate stale read
                    seq = 1
                await uow.events.append(new_event(record.id, seq, actor=actor))
                await uow.commit()
                return "won"
        except SeqConflict:
            return "conflict"

    results = await asyncio.gather(writer("actor-a"), writer("actor-b"))
    assert sorted(results) == ["conflict", "won"]
    async with uow_factory(readonly=True) as uow:
        assert await uow.events.count(record.id) == 1


async def test_a_reused_nonce_raises_nonce_conflict(uow_factory: UnitOfWorkFactory) -> None:
    record = await _stored(uow_factory)
    async with uow_factory() as uow:
        await uow.events.append(new_event(record.id, 1, nonce="n-1"))
        await uow.commit()
    async with uow_factory() as uow:
        with pytest.raises(NonceConflict) as caught:
            await uow.events.append(new_event(record.id, 2, nonce="n-1", action="other"))
    assert caught.value.code == "REPLAYED"


async def test_the_same_envelope_twice_is_refused_by_its_actor_and_nonce(
    uow_factory: UnitOfWorkFactory,
) -> None:
    """The envelope's (actor, nonce) keeps it from being stored twice (identity has no
    unique index of its own: migration 0021); the runtime answers such a resubmission
    as a duplicate by finding the stored original (`originals`)."""
    record = await _stored(uow_factory)
    event = new_event(record.id, 1)
    async with uow_factory() as uow:
        await uow.events.append(event)
        await uow.commit()
    async with uow_factory() as uow:
        with pytest.raises(NonceConflict):
            await uow.events.append(replace(event, seq=2))
    async with uow_factory(readonly=True) as uow:
        key = (event.identity, event.actor, event.nonce)
        assert list(await uow.events.originals([key])) == [event.identity]


async def test_latest_events_by_process_returns_the_last_n_in_order(
    uow_factory: UnitOfWorkFactory,
) -> None:
    a = await _stored(uow_factory)
    b = await _stored(uow_factory)
    async with uow_factory() as uow:
        for seq in range(1, 6):
            await uow.events.append(new_event(a.id, seq))
        await uow.events.append(new_event(b.id, 1))
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        latest = await uow.events.latest_events_by_process([a.id, b.id, "missing"], 2)
        assert [e.seq for e in latest[a.id]] == [4, 5]
        assert [e.seq for e in latest[b.id]] == [1]
        assert "missing" not in latest
        page = await uow.events.for_process(a.id, after_seq=2, limit=2)
        assert [e.seq for e in page] == [3, 4]
        everything = await uow.events.scan()
        assert len(everything) == 6
        by_id = await uow.events.by_ids([everything[0].id or 0])
        assert list(by_id.values()) == [everything[0]]


async def test_processes_by_ids_and_filtered_listing(uow_factory: UnitOfWorkFactory) -> None:
    first = await _stored(uow_factory, now=at(1))
    second = await _stored(uow_factory, now=at(2), state="review")
    other = await _stored(uow_factory, now=at(3), workflow="case/review/kyc")
    async with uow_factory(readonly=True) as uow:
        found = await uow.processes.processes_by_ids([first.id, other.id, "nope"])
        assert found == {first.id: first, other.id: other}
        retail = await uow.processes.find(ProcessFilter(namespace="customer/retail"))
        assert [p.id for p in retail] == [first.id, second.id]
        page = await uow.processes.find(
            ProcessFilter(), after=(first.created_at, first.id), limit=1
        )
        assert [p.id for p in page] == [second.id]
        assert [p.id for p in await uow.processes.find(ProcessFilter(state="review"))] == [
            second.id
        ]
        assert await uow.processes.count(ProcessFilter(workflow="case/review/kyc")) == 1
        assert await uow.processes.all_ids() == [first.id, second.id, other.id]


async def test_process_rows_are_locked_in_ascending_id_order_or_refused(
    uow_factory: UnitOfWorkFactory,
) -> None:
    """Step 1 of the lock order: a transaction never locks a process row after one with a
    greater id (that is how two of them could each hold what the other waits for)."""
    low = await _stored(uow_factory, process_id="00000000-0000-4000-8000-00000000000a")
    high = await _stored(uow_factory, process_id="00000000-0000-4000-8000-00000000000b")
    async with uow_factory() as uow:
        assert set(await uow.processes.lock([high.id, low.id])) == {low.id, high.id}
        assert await uow.processes.get(low.id, for_update=True) is not None  # held: fine
    async with uow_factory() as uow:
        await uow.processes.get(high.id, for_update=True)
        if uow.dialect == "postgresql":
            with pytest.raises(LockOrderError):
                await uow.processes.get(low.id, for_update=True)
        else:  # one writer at a time: no row locks, nothing to order
            assert await uow.processes.get(low.id, for_update=True) is not None


async def test_a_row_inserted_by_the_transaction_itself_counts_as_held(
    uow_factory: UnitOfWorkFactory,
) -> None:
    high = await _stored(uow_factory, process_id="00000000-0000-4000-8000-00000000000d")
    async with uow_factory() as uow:
        await uow.processes.lock([high.id])
        await uow.processes.add(new_process("00000000-0000-4000-8000-00000000000c"))
        # Invisible to every other transaction until COMMIT: no order to keep with it.
        assert await uow.processes.get("00000000-0000-4000-8000-00000000000c", for_update=True)
