"""Assignments: queues, and conditional claims with exactly one winner per race."""

from __future__ import annotations

import asyncio

from persistence_factories import T0, at, new_process

from stateward.persistence import UnitOfWorkFactory
from stateward.records import AssignmentRecord


async def _process_with_assignment(
    uow_factory: UnitOfWorkFactory, assignment_id: str = "as-1", team: str = "analyst"
) -> str:
    process = new_process(state="review")
    async with uow_factory() as uow:
        await uow.processes.add(process)
        await uow.assignments.open(
            AssignmentRecord(assignment_id, process.id, "review", team, "unassigned", 1, T0)
        )
        await uow.commit()
    return process.id


async def test_claim_race_has_exactly_one_winner(uow_factory: UnitOfWorkFactory) -> None:
    await _process_with_assignment(uow_factory)
    start = asyncio.Event()

    async def claimer(n: int) -> bool:
        await start.wait()
        async with uow_factory() as uow:
            won = await uow.assignments.claim_assignment("as-1", f"actor-{n}", at(n))
            await uow.commit()
            return won

    tasks = [asyncio.create_task(claimer(n)) for n in range(20)]
    start.set()
    results = await asyncio.gather(*tasks)
    assert results.count(True) == 1
    winner = f"actor-{results.index(True)}"
    async with uow_factory(readonly=True) as uow:
        stored = await uow.assignments.get("as-1")
    assert stored is not None and (stored.status, stored.assignee) == ("claimed", winner)


async def test_an_assignment_moves_through_claim_unclaim_complete(
    uow_factory: UnitOfWorkFactory,
) -> None:
    process_id = await _process_with_assignment(uow_factory)
    async with uow_factory() as uow:
        assert await uow.assignments.claim_assignment("as-1", "k1", at(1))
        assert not await uow.assignments.unclaim("as-1", assignee="k2")
        assert await uow.assignments.unclaim("as-1", assignee="k1")
        assert await uow.assignments.claim_assignment("as-1", "k2", at(2))
        assert not await uow.assignments.complete("as-1", "k1", {"ok": True}, at(3))
        assert await uow.assignments.complete("as-1", "k2", {"ok": True, "score": 7}, at(3))
        assert not await uow.assignments.cancel("as-1", at(4))
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        done = await uow.assignments.get("as-1")
        assert done == AssignmentRecord(
            "as-1",
            process_id,
            "review",
            "analyst",
            "completed",
            1,
            T0,
            assignee="k2",
            review_data={"ok": True, "score": 7},
            claimed_at=at(2),
            completed_at=at(3),
        )
        assert await uow.assignments.open_for_process(process_id) == []
        assert [
            a.id for a in (await uow.assignments.assignments_by_process([process_id]))[process_id]
        ] == ["as-1"]


async def test_leaving_the_state_cancels_open_assignments(uow_factory: UnitOfWorkFactory) -> None:
    process_id = await _process_with_assignment(uow_factory)
    async with uow_factory() as uow:
        cancelled = await uow.assignments.cancel_open_for_process(process_id, at(5))
        await uow.commit()
    assert [(a.id, a.status, a.cancelled_at) for a in cancelled] == [("as-1", "cancelled", at(5))]
    async with uow_factory() as uow:
        assert not await uow.assignments.claim_assignment("as-1", "k1", at(6))


async def test_queues_list_by_team_and_by_assignee(uow_factory: UnitOfWorkFactory) -> None:
    await _process_with_assignment(uow_factory, "as-1", "analyst")
    await _process_with_assignment(uow_factory, "as-2", "analyst")
    await _process_with_assignment(uow_factory, "as-3", "manager")
    async with uow_factory() as uow:
        await uow.assignments.claim_assignment("as-2", "k1", at(1))
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        team = await uow.assignments.queue(team="analyst")
        assert [a.id for a in team] == ["as-1", "as-2"]
        open_team = await uow.assignments.queue(team="analyst", status="unassigned")
        assert [a.id for a in open_team] == ["as-1"]
        mine = await uow.assignments.queue(assignee="k1", status="claimed")
        assert [a.id for a in mine] == ["as-2"]
        page = await uow.assignments.queue(team="analyst", after=(T0, "as-1"))
        assert [a.id for a in page] == ["as-2"]
        assert set(await uow.assignments.by_ids(["as-1", "as-3", "x"])) == {"as-1", "as-3"}
