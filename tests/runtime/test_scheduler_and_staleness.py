"""Timers fire their action as `system` exactly once; idle instances become stale."""

from __future__ import annotations

import asyncio

import pytest
from kernel_fixtures import TICKET, TIMED, Desk

from stateward.domain.errors import DomainError
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.verify import verify
from stateward.runtime.sweeps import scheduler, staleness
from stateward.settings import Settings


@pytest.fixture
async def desk(admin_rt, operator) -> Desk:
    return await Desk(admin_rt, operator).setup(TICKET, TIMED)


async def _timed(desk: Desk, arm: str = "arm") -> str:
    pid = (await start_instance(desk.rt, desk.admin, TIMED["$path"], {})).record.id
    await perform_action(desk.rt, desk.admin, pid, arm, {})
    return pid


async def _timers(desk: Desk, pid: str) -> list[tuple[str, str | None]]:
    async with desk.rt.uow(readonly=True) as uow:
        return [(t.status, t.detail) for t in await uow.schedules.for_process(pid)]


async def test_a_due_timer_fires_its_action_as_system_once(desk):
    pid = await _timed(desk)
    desk.rt.clock.advance(59)
    assert (await scheduler.fire_due(desk.rt)).fired == []
    desk.rt.clock.advance(1)
    report = await scheduler.fire_due(desk.rt)
    assert len(report.fired) == 1
    record = await desk.process(pid)
    assert (record.state, record.status) == ("expired", "completed")  # role admin: system may
    assert (await scheduler.fire_due(desk.rt)).fired == []
    assert await _timers(desk, pid) == [("fired", None)]
    async with desk.rt.uow(readonly=True) as uow:
        last = (await uow.events.for_process(pid))[-1]
    assert (last.action, last.actor, last.input["action"]) == ("$timer", "system", "expire")
    assert (await verify(desk.rt, pid)).valid


async def test_a_timer_whose_action_no_longer_applies_is_recorded_not_applicable(desk):
    pid = await _timed(desk, "arm_late")
    await perform_action(desk.rt, desk.admin, pid, "finish", {})  # completed: timers cancelled
    desk.rt.clock.advance(601)
    assert (await scheduler.fire_due(desk.rt)).fired == []
    assert await _timers(desk, pid) == [("cancelled", None)]
    other = await _timed(desk, "arm_late")
    async with desk.rt.uow() as uow:  # a timer left pending for a process that moved on
        await uow.schedules.add(other, "submit", desk.rt.clock.now(), desk.rt.clock.now())
        await uow.commit()
    report = await scheduler.fire_due(desk.rt)
    assert len(report.not_applicable) == 1
    assert ("not_applicable", "NOT_FOUND: action 'submit' does not exist in ops/desk/timed") in (
        await _timers(desk, other)
    )
    assert (await scheduler.fire_due(desk.rt)).not_applicable == []  # recorded once


async def test_concurrent_schedulers_fire_each_timer_once(desk):
    pids = [await _timed(desk) for _ in range(6)]
    desk.rt.clock.advance(61)
    reports = await asyncio.gather(*(scheduler.fire_due(desk.rt) for _ in range(3)))
    assert sum(len(r.fired) for r in reports) == 6
    for pid in pids:
        assert (await desk.actions(pid)).count("$timer") == 1


async def test_timers_survive_a_restart(desk, db_url, clock):
    pid = await _timed(desk)
    clock.advance(61)
    restarted = await Runtime.open(
        Settings(database_url=db_url), clock=clock, node_key=desk.rt.node_key
    )
    try:
        assert len((await scheduler.fire_due(restarted)).fired) == 1
    finally:
        await restarted.close()
    assert (await desk.process(pid)).state == "expired"


async def test_an_idle_instance_becomes_stale_and_acting_reactivates_it(desk):
    rt = desk.rt
    pid = await desk.ticket_in_review()
    busy = await desk.ticket_in_review()
    rt.clock.advance(rt.settings.stale_after - 10)
    await perform_action(rt, desk.admin, busy, "note", {})
    rt.clock.advance(11)
    assert await staleness.sweep(rt) == [pid]
    assert await staleness.sweep(rt) == []
    assert (await desk.process(pid)).status == "stale"
    assert (await desk.process(busy)).status == "active"
    assert [m.type for m in await desk.outbox(pid)][-1] == "workflow.stale"
    await perform_action(rt, desk.admin, pid, "note", {})
    assert (await desk.process(pid)).status == "active"
    assert (await verify(rt, pid)).valid


async def test_concurrent_sweeps_mark_each_instance_once(desk):
    pids = [await desk.ticket_in_review() for _ in range(5)]
    desk.rt.clock.advance(desk.rt.settings.stale_after + 1)
    results = await asyncio.gather(*(staleness.sweep(desk.rt) for _ in range(3)))
    assert sorted(p for r in results for p in r) == sorted(pids)


async def test_kernel_sweep_operations_are_refused_to_anyone_but_the_system(desk):
    from stateward.runtime.core.act import act
    from stateward.runtime.core.commands import attest

    pid = await desk.ticket_in_review()
    for name, input in (
        ("$stale", {"cutoff": "2099-01-01T00:00:00.000Z"}),
        ("$sla", {"kind": "breach", "state": "review", "deadline": "2000-01-01T00:00:00.000Z"}),
        ("$timer", {"schedule": 1, "action": "approve"}),
        ("$automate", {"hook": "x:y", "result": {}}),
    ):
        signed = attest(desk.rt, desk.admin, pid, name, TICKET["$path"], input)
        with pytest.raises(DomainError) as info:
            await act(desk.rt, signed, attested=True)
        assert info.value.code == "FORBIDDEN", name
