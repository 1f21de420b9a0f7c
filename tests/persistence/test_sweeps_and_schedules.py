"""SLA marks, staleness and timers are claimed exactly once, even by concurrent scanners."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace

import pytest
from persistence_factories import T0, at, new_process

from stateward.persistence import UnitOfWorkFactory
from stateward.records import ProcessRecord

ROWS = 30


async def _seed_sla(uow_factory: UnitOfWorkFactory) -> list[ProcessRecord]:
    records = []
    async with uow_factory() as uow:
        for n in range(ROWS):
            record = new_process(sla_warn_at=at(80 + n), sla_due_at=at(100 + n))
            await uow.processes.add(record)
            records.append(record)
        done = new_process(status="completed", sla_warn_at=at(1), sla_due_at=at(2))
        await uow.processes.add(done)  # not live: never fires
        await uow.commit()
    return records


@pytest.mark.parametrize("kind", ["warning", "breach"])
async def test_sla_marks_fire_once_under_two_concurrent_scanners(
    uow_factory: UnitOfWorkFactory, kind: str
) -> None:
    await _seed_sla(uow_factory)
    fired: Counter[str] = Counter()

    async def scanner() -> None:
        while True:
            async with uow_factory() as uow:
                claims = await uow.sweeps.claim_due_sla(at(10_000), 7, kind)
                await asyncio.sleep(0)  # let the other scanner interleave
                await uow.commit()
            if not claims:
                return
            fired.update(c.process.id for c in claims)

    await asyncio.gather(scanner(), scanner())
    assert len(fired) == ROWS
    assert set(fired.values()) == {1}


async def test_only_due_sla_marks_are_claimed_and_carry_their_deadline(
    uow_factory: UnitOfWorkFactory,
) -> None:
    records = await _seed_sla(uow_factory)
    async with uow_factory() as uow:
        warnings = await uow.sweeps.claim_due_sla(at(82), 100, "warning")
        breaches = await uow.sweeps.claim_due_sla(at(82), 100, "breach")
        await uow.commit()
    assert [c.process.id for c in warnings] == [r.id for r in records[:3]]
    assert [c.deadline for c in warnings] == [at(80), at(81), at(82)]
    assert all(c.process.sla_warned_at == at(82) for c in warnings)
    assert breaches == []
    with pytest.raises(ValueError):
        async with uow_factory() as uow:
            await uow.sweeps.claim_due_sla(at(82), 1, "nap")


async def test_a_rolled_back_claim_fires_again(uow_factory: UnitOfWorkFactory) -> None:
    await _seed_sla(uow_factory)
    async with uow_factory() as uow:
        assert len(await uow.sweeps.claim_due_sla(at(80), 10, "warning")) == 1
        # no commit: the event write failed, say
    async with uow_factory() as uow:
        assert len(await uow.sweeps.claim_due_sla(at(80), 10, "warning")) == 1
        await uow.commit()
    async with uow_factory() as uow:
        assert await uow.sweeps.claim_due_sla(at(80), 10, "warning") == []


async def test_re_arming_an_sla_on_state_entry_lets_it_fire_again(
    uow_factory: UnitOfWorkFactory,
) -> None:
    (first, *_) = await _seed_sla(uow_factory)
    async with uow_factory() as uow:
        (claim,) = await uow.sweeps.claim_due_sla(at(80), 1, "warning")
        moved = replace(
            claim.process,
            seq=1,
            state="review",
            sla_warn_at=at(500),
            sla_due_at=at(600),
            sla_warned_at=None,
        )
        await uow.processes.update(moved, expected_seq=0)
        await uow.commit()
    async with uow_factory() as uow:
        again = await uow.sweeps.claim_due_sla(at(500), 100, "warning")
    assert first.id in [c.process.id for c in again]


async def test_idle_active_instances_become_stale_once(uow_factory: UnitOfWorkFactory) -> None:
    async with uow_factory() as uow:
        idle = new_process(now=T0)
        busy = new_process(now=at(1000))
        done = new_process(now=T0, status="completed")
        for record in (idle, busy, done):
            await uow.processes.add(record)
        await uow.commit()
    async with uow_factory() as uow:
        stale = await uow.sweeps.mark_stale(cutoff=at(500), limit=10, now=at(2000))
        await uow.commit()
    assert [(r.id, r.status, r.updated_at) for r in stale] == [(idle.id, "stale", at(2000))]
    async with uow_factory() as uow:
        assert await uow.sweeps.mark_stale(cutoff=at(500), limit=10, now=at(2001)) == []


async def test_due_timers_fire_once_across_concurrent_nodes(
    uow_factory: UnitOfWorkFactory,
) -> None:
    process = new_process()
    async with uow_factory() as uow:
        await uow.processes.add(process)
        for n in range(ROWS):
            await uow.schedules.add(process.id, "remind", at(n), T0, key=f"k{n}")
        await uow.schedules.add(process.id, "later", at(10_000), T0)
        await uow.commit()
    fired: Counter[int] = Counter()
    nodes: dict[int, str] = {}

    async def node(name: str) -> None:
        while True:
            async with uow_factory() as uow:
                claimed = await uow.schedules.claim_due_schedules(at(5000), 4, name)
                await asyncio.sleep(0)
                await uow.commit()
            if not claimed:
                return
            for s in claimed:
                fired[s.id] += 1
                nodes[s.id] = name
                assert (s.status, s.claimed_by, s.fired_at) == ("fired", name, at(5000))

    await asyncio.gather(node("node-a"), node("node-b"))
    assert len(fired) == ROWS and set(fired.values()) == {1}
    async with uow_factory(readonly=True) as uow:
        pending = await uow.schedules.for_process(process.id, "pending")
        assert [s.action for s in pending] == ["later"]
        assert await uow.schedules.next_due_at() == at(10_000)


async def test_timers_can_be_replaced_cancelled_and_finished(
    uow_factory: UnitOfWorkFactory,
) -> None:
    process = new_process()
    async with uow_factory() as uow:
        await uow.processes.add(process)
        await uow.schedules.add(process.id, "remind", at(10), T0, key="r")
        replaced = await uow.schedules.add(process.id, "remind", at(20), T0, key="r")
        await uow.schedules.add(process.id, "expire", at(30), T0)
        assert await uow.schedules.cancel(process.id, action="expire") == 1
        (claimed,) = await uow.schedules.claim_due_schedules(at(25), 10, "n")
        await uow.schedules.finish(claimed.id, "not_applicable", "process left the state")
        await uow.commit()
    assert claimed.id == replaced.id
    async with uow_factory(readonly=True) as uow:
        rows = await uow.schedules.for_process(process.id)
    assert [(s.due_at, s.status) for s in rows] == [
        (at(10), "cancelled"),
        (at(20), "not_applicable"),
        (at(30), "cancelled"),
    ]
    assert rows[1].detail == "process left the state"
