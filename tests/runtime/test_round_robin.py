"""`stage_config.auto_assign: "round_robin"` (issue 13): six reviews over a team of three
go to each member twice, in a stable order, skipping actors without the team role; the
assignee alone (or an admin) acts; `verify` replays every log. SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from kernel_fixtures import DESK, Desk

from stateward.domain.errors import DomainError
from stateward.governance.keys import generate_keypair
from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.insight.verify import verify

QUEUE: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{DESK}/expenses",
    "initial": "submitted",
    "states": {
        "submitted": {"label": "Submitted"},
        "review": {
            "label": "Review",
            "assign": "reviewer",
            "stage_config": {"auto_assign": "round_robin"},
        },
        "approved": {"label": "Approved", "terminal": True},
    },
    "actions": {
        "submit": {"from": "submitted", "to": "review"},
        "approve": {"role": "reviewer", "from": "review", "to": "approved"},
    },
}


@pytest.fixture
async def desk(admin_rt, operator) -> Desk:
    desk = await Desk(admin_rt, operator).setup(QUEUE)
    desk.reviewers = sorted(generate_keypair().public for _ in range(3))  # type: ignore[attr-defined]
    for reviewer in desk.reviewers:  # type: ignore[attr-defined]
        await registry.grant_role(admin_rt, operator, DESK, reviewer, ["reviewer"])
    return desk


async def _in_review(desk: Desk) -> str:
    pid = (await start_instance(desk.rt, desk.admin, QUEUE["$path"], {})).record.id
    await perform_action(desk.rt, desk.admin, pid, "submit", {})
    return pid


async def test_six_reviews_go_round_robin_over_three_reviewers(desk):
    pids = [await _in_review(desk) for _ in range(6)]
    assignees = [(await desk.open_assignment(pid)).assignee for pid in pids]
    reviewers = desk.reviewers
    assert assignees == reviewers + reviewers  # analysts and viewers hold no reviewer role
    assert {(await desk.open_assignment(pid)).status for pid in pids} == {"claimed"}
    assigned = [m for m in await desk.outbox(pids[4]) if m.type == "workflow.assigned"]
    assert assigned[-1].payload["details"] == {"assignee": reviewers[1], "turn": 4, "members": 3}
    for pid in pids:
        assert (await verify(desk.rt, pid)).valid


async def test_only_the_assigned_reviewer_acts(desk):
    pid = await _in_review(desk)
    first, second = desk.reviewers[0], desk.reviewers[1]
    with pytest.raises(DomainError) as refused:
        await perform_action(desk.rt, second, pid, "approve", {})
    assert refused.value.code == "FORBIDDEN"
    await perform_action(desk.rt, first, pid, "approve", {})
    assert (await desk.process(pid)).status == "completed"
    assert (await verify(desk.rt, pid)).valid
