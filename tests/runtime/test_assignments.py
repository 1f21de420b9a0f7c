"""Review-queue assignments: claim, unclaim, complete, cancel, queues (DESIGN §7)."""

from __future__ import annotations

import asyncio

import pytest
from kernel_fixtures import Desk

from stateward.domain.errors import DomainError
from stateward.governance.keys import generate_keypair
from stateward.runtime.core.commands import perform_action
from stateward.runtime.insight.verify import verify
from stateward.runtime.queues.assignments import (
    assignment_cursor,
    cancel_assignment,
    claim_assignment,
    complete_assignment,
    list_assignments,
    my_assignments,
    unclaim_assignment,
)


async def _code(coro) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(DomainError) as info:
        await coro
    return info.value.code


@pytest.fixture
async def desk(admin_rt, operator) -> Desk:
    return await Desk(admin_rt, operator).setup()


async def test_entering_an_assigned_state_opens_an_unassigned_assignment(desk):
    pid = await desk.ticket_in_review()
    a = await desk.open_assignment(pid)
    assert (a.state, a.team, a.status, a.assignee) == ("review", "analyst", "unassigned", None)
    assigned = [m for m in await desk.outbox(pid) if m.type == "workflow.assigned"]
    assert assigned[0].payload["assignmentId"] == a.id and assigned[0].team == "analyst"


async def test_claiming_needs_the_team_role(desk):
    a = await desk.open_assignment(await desk.ticket_in_review())
    assert await _code(claim_assignment(desk.rt, desk.member, a.id)) == "FORBIDDEN"
    # One who may not read the instance gets the answer of a missing assignment.
    assert await _code(claim_assignment(desk.rt, desk.outsider, a.id)) == "NOT_FOUND"
    assert await _code(claim_assignment(desk.rt, desk.outsider, "nope")) == "NOT_FOUND"
    claimed = await claim_assignment(desk.rt, desk.analysts[0], a.id)
    assert (claimed.status, claimed.assignee) == ("claimed", desk.analysts[0])
    assert claimed.claimed_at is not None


async def test_a_second_claim_is_already_claimed(desk):
    a = await desk.open_assignment(await desk.ticket_in_review())
    await claim_assignment(desk.rt, desk.analysts[0], a.id)
    assert await _code(claim_assignment(desk.rt, desk.analysts[1], a.id)) == "ALREADY_CLAIMED"


async def test_claim_race_between_twenty_claimers_has_exactly_one_winner(admin_rt, operator):
    desk = Desk(admin_rt, operator)
    desk.analysts = [generate_keypair().public for _ in range(20)]
    await desk.setup()
    pid = await desk.ticket_in_review()
    a = await desk.open_assignment(pid)
    results = await asyncio.gather(
        *(claim_assignment(desk.rt, who, a.id) for who in desk.analysts), return_exceptions=True
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(e, DomainError) and e.code == "ALREADY_CLAIMED" for e in losers), losers
    final = await desk.open_assignment(pid)
    assert final.assignee == winners[0].assignee
    assert (await desk.actions(pid)).count("$claim") == 1


async def test_once_claimed_only_the_assignee_or_an_admin_may_act(desk):
    pid = await desk.ticket_in_review()
    a = await desk.open_assignment(pid)
    await claim_assignment(desk.rt, desk.analysts[0], a.id)
    refused = perform_action(desk.rt, desk.analysts[1], pid, "reject", {})
    assert await _code(refused) == "FORBIDDEN"
    await perform_action(desk.rt, desk.analysts[0], pid, "note", {})
    await perform_action(desk.rt, desk.admin, pid, "note", {})
    assert (await desk.process(pid)).data["notes"] == 2


async def test_unclaim_is_for_the_assignee_or_an_admin(desk):
    pid = await desk.ticket_in_review()
    a = await desk.open_assignment(pid)
    await claim_assignment(desk.rt, desk.analysts[0], a.id)
    assert await _code(unclaim_assignment(desk.rt, desk.analysts[1], a.id)) == "FORBIDDEN"
    back = await unclaim_assignment(desk.rt, desk.analysts[0], a.id)
    assert (back.status, back.assignee) == ("unassigned", None)
    await claim_assignment(desk.rt, desk.analysts[1], a.id)
    assert (await unclaim_assignment(desk.rt, desk.admin, a.id)).status == "unassigned"
    types = [m.type for m in await desk.outbox(pid)]
    assert types.count("workflow.claimed") == 2 and types.count("workflow.unclaimed") == 2


async def test_complete_records_the_review_and_performs_the_action_in_one_event(desk):
    pid = await desk.ticket_in_review()
    a = await desk.open_assignment(pid)
    await claim_assignment(desk.rt, desk.analysts[0], a.id)
    before = await desk.actions(pid)
    done = await complete_assignment(
        desk.rt, desk.analysts[0], a.id, {"verdict": "ok"}, action="approve"
    )
    assert (done.status, done.review_data) == ("completed", {"verdict": "ok"})
    record = await desk.process(pid)
    assert (record.state, record.status, record.data["verdict"]) == ("done", "completed", "ok")
    assert await desk.actions(pid) == [*before, "$complete"]
    types = [m.type for m in await desk.outbox(pid)][-3:]
    assert types == ["workflow.assignment.completed", "workflow.advanced", "workflow.completed"]
    assert (await verify(desk.rt, pid)).valid


async def test_complete_without_an_action_advances(desk):
    pid = await desk.ticket_in_review()
    a = await desk.open_assignment(pid)
    await claim_assignment(desk.rt, desk.analysts[0], a.id)
    await complete_assignment(desk.rt, desk.analysts[0], a.id, {"verdict": "fine"})
    assert (await desk.process(pid)).state == "done"  # `approve` is the first applicable


async def test_only_the_assignee_completes_and_a_refused_action_changes_nothing(desk):
    pid = await desk.ticket_in_review()
    a = await desk.open_assignment(pid)
    unclaimed = complete_assignment(desk.rt, desk.analysts[0], a.id, {}, "approve")
    assert await _code(unclaimed) == "FORBIDDEN"
    await claim_assignment(desk.rt, desk.analysts[0], a.id)
    other = complete_assignment(desk.rt, desk.analysts[1], a.id, {}, "approve")
    assert await _code(other) == "FORBIDDEN"
    wrong = complete_assignment(desk.rt, desk.analysts[0], a.id, {}, "submit")
    assert await _code(wrong) == "WRONG_STATE"
    still = await desk.open_assignment(pid)
    assert (still.status, still.review_data) == ("claimed", None)


async def test_leaving_the_state_cancels_its_open_assignment(desk):
    pid = await desk.ticket_in_review()
    a = await desk.open_assignment(pid)
    await perform_action(desk.rt, desk.admin, pid, "reject", {})
    async with desk.rt.uow(readonly=True) as uow:
        closed = await uow.assignments.get(a.id)
    assert closed is not None and closed.status == "cancelled"
    cancelled = [m for m in await desk.outbox(pid) if m.type == "workflow.assignment.cancelled"]
    assert cancelled[0].payload["assignmentId"] == a.id


async def test_cancelling_an_assignment_is_for_admins(desk):
    pid = await desk.ticket_in_review()
    a = await desk.open_assignment(pid)
    assert await _code(cancel_assignment(desk.rt, desk.analysts[0], a.id)) == "FORBIDDEN"
    assert (await cancel_assignment(desk.rt, desk.admin, a.id)).status == "cancelled"
    assert await _code(claim_assignment(desk.rt, desk.analysts[0], a.id)) == "WRONG_STATE"
    assert await _code(cancel_assignment(desk.rt, desk.admin, "nope")) == "NOT_FOUND"


async def test_queues_by_team_and_mine_page_oldest_first(desk):
    pids = []
    for _ in range(3):
        pids.append(await desk.ticket_in_review())
        desk.rt.clock.advance(1)
    first = await list_assignments(desk.rt, desk.analysts[0], "analyst", "unassigned", 2)
    assert [a.process_id for a in first] == pids  # first + 1 rows: a next page exists
    rest = await list_assignments(
        desk.rt, desk.analysts[0], "analyst", None, 2, assignment_cursor(first[1])
    )
    assert [a.process_id for a in rest] == pids[2:]
    assert await list_assignments(desk.rt, desk.outsider, "analyst") == []
    assert len(await list_assignments(desk.rt, desk.admin, None)) == 3
    await claim_assignment(desk.rt, desk.analysts[1], first[0].id)
    mine = await my_assignments(desk.rt, desk.analysts[1], "claimed")
    assert [a.id for a in mine] == [first[0].id]
    assert await my_assignments(desk.rt, desk.analysts[0]) == []
    assert await _code(list_assignments(desk.rt, desk.admin, None, "weird")) == "INVALID_INPUT"
