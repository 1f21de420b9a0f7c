"""DSL 2.1 in the kernel runtime: `$cancel` outcomes, state and idle timeouts through the
real scheduler, start policies, person assignments and SLA warning notifications — on
SQLite and PostgreSQL, each log replayed by `verify`."""

from __future__ import annotations

from typing import Any

import pytest
from kernel_fixtures import DESK, Desk

from stateward.domain.errors import DomainError
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.insight.verify import verify
from stateward.runtime.queues.assignments import my_assignments
from stateward.runtime.sweeps import scheduler, sla
from stateward.runtime.sweeps.notifications import list_notifications

DRAFT: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/draft",
    "initial": "draft",
    "idle_timeout": {"seconds": 3600, "action": "auto_cancel"},
    "states": {
        "draft": {"label": "Draft"},
        "waiting": {
            "label": "Waiting for an answer",
            "timeout": {"seconds": 60, "action": "expire"},
        },
        "revise": {"label": "Revise", "assign": {"user": {"$ref": "data.requester"}}},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "edit": {"from": "draft", "mutate": {"$increment": {"edits": 1}}},
        "ask": {"from": "draft", "to": "waiting"},
        "answer": {"from": "waiting", "to": "draft"},
        "send_back": {"from": ["draft", "waiting"], "to": "revise"},
        "resubmit": {"from": "revise", "to": "draft"},
        "finish": {"from": "draft", "to": "done"},
        "expire": {"from": "waiting", "to": "$cancel"},
        "auto_cancel": {"to": "$cancel"},
    },
}
PAYMENT: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/payment",
    "initial": "open",
    "start": {"spawn_only": True},
    "states": {"open": {"label": "Open"}, "paid": {"label": "Paid", "terminal": True}},
    "actions": {"pay": {"from": "open", "to": "paid"}},
}
BUYING: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/buying",
    "initial": "open",
    "start": {"roles": "buyer"},
    "states": {
        "open": {"label": "Open", "sla_seconds": 100, "sla_warning": 0.5, "assign": "analyst"},
        "quiet": {
            "label": "Quiet",
            "sla_seconds": 100,
            "sla_warning_notify": False,
            "assign": "analyst",
        },
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "hush": {"from": "open", "to": "quiet"},
        "order": {
            "from": ["open", "quiet"],
            "to": "done",
            "spawn": [
                {"workflow": "ops/desk/payment", "data": {"amount": {"$ref": "data.amount"}}}
            ],
        },
    },
}


@pytest.fixture
async def desk(admin_rt, operator) -> Desk:
    return await Desk(admin_rt, operator).setup(DRAFT, PAYMENT, BUYING)


async def _start(desk: Desk, path: str, **data: Any) -> str:
    return (await start_instance(desk.rt, desk.admin, path, data)).record.id


async def _timers(desk: Desk, pid: str) -> dict[str | None, str]:
    async with desk.rt.uow(readonly=True) as uow:
        return {t.key: t.status for t in await uow.schedules.for_process(pid)}


async def test_a_state_timeout_fires_once_and_ends_the_instance_cancelled(desk):
    pid = await _start(desk, DRAFT["$path"])
    await perform_action(desk.rt, desk.admin, pid, "ask", {})
    assert (await _timers(desk, pid))["$timeout:waiting"] == "pending"
    desk.rt.clock.advance(61)
    first = await scheduler.fire_due(desk.rt)
    again = await scheduler.fire_due(desk.rt)
    assert len(first.fired) == 1 and again.fired == []
    record = await desk.process(pid)
    assert (record.status, record.state) == ("cancelled", "waiting")
    assert "workflow.cancelled" in [m.type for m in await desk.outbox(pid)]
    assert (await desk.actions(pid))[-1] == "$timer"
    assert (await verify(desk.rt, pid)).valid


async def test_leaving_the_state_cancels_its_timeout(desk):
    pid = await _start(desk, DRAFT["$path"])
    await perform_action(desk.rt, desk.admin, pid, "ask", {})
    await perform_action(desk.rt, desk.admin, pid, "answer", {})
    assert (await _timers(desk, pid))["$timeout:waiting"] == "cancelled"
    desk.rt.clock.advance(120)
    assert (await scheduler.fire_due(desk.rt)).fired == []
    assert (await desk.process(pid)).state == "draft"
    assert (await verify(desk.rt, pid)).valid


async def test_every_event_re_arms_the_idle_timeout_and_idleness_auto_cancels(desk):
    pid = await _start(desk, DRAFT["$path"])
    for _ in range(3):
        desk.rt.clock.advance(3000)  # never an hour without an event
        assert (await scheduler.fire_due(desk.rt)).fired == []
        await perform_action(desk.rt, desk.admin, pid, "edit", {})
    async with desk.rt.uow(readonly=True) as uow:
        idle = [t for t in await uow.schedules.for_process(pid) if t.key == "$idle"]
    assert [t.status for t in idle].count("pending") == 1
    desk.rt.clock.advance(3601)
    assert len((await scheduler.fire_due(desk.rt)).fired) == 1
    record = await desk.process(pid)
    assert (record.status, record.data["edits"]) == ("cancelled", 3)
    assert (await verify(desk.rt, pid)).valid


async def test_an_auto_cancel_action_ends_cancelled_with_the_reason(desk):
    pid = await _start(desk, DRAFT["$path"])
    await perform_action(desk.rt, desk.admin, pid, "auto_cancel", {"reason": "duplicate"})
    assert (await desk.process(pid)).status == "cancelled"
    cancelled = [m for m in await desk.outbox(pid) if m.type == "workflow.cancelled"]
    assert cancelled[0].payload["details"]["reason"] == "duplicate"
    assert await _timers(desk, pid) == {"$idle": "cancelled"}


async def test_a_spawn_only_workflow_refuses_start_instance_but_a_spawn_starts_it(desk):
    with pytest.raises(DomainError) as refused:
        await start_instance(desk.rt, desk.admin, PAYMENT["$path"], {})
    assert refused.value.code == "FORBIDDEN"
    assert "spawn" in refused.value.message
    with pytest.raises(DomainError) as no_role:
        await start_instance(desk.rt, desk.analysts[0], BUYING["$path"], {})
    assert no_role.value.code == "FORBIDDEN"
    pid = await _start(desk, BUYING["$path"], amount=120)  # an admin may start it
    done = await perform_action(desk.rt, desk.admin, pid, "order", {})
    (child,) = done.children
    assert (child.workflow, child.data["amount"], child.parent_id) == (
        PAYMENT["$path"],
        120,
        pid,
    )
    assert (await verify(desk.rt, child.id)).valid


async def test_assign_user_opens_a_claimed_assignment_for_the_referenced_person(desk):
    rita = desk.analysts[1]
    pid = await _start(desk, DRAFT["$path"], requester=rita)
    await perform_action(desk.rt, desk.admin, pid, "send_back", {})
    mine = await my_assignments(desk.rt, rita)
    assert [(a.process_id, a.status, a.assignee) for a in mine] == [(pid, "claimed", rita)]
    with pytest.raises(DomainError) as other:
        await perform_action(desk.rt, desk.analysts[0], pid, "resubmit", {})
    assert other.value.code == "FORBIDDEN"
    await perform_action(desk.rt, rita, pid, "resubmit", {})
    assert await my_assignments(desk.rt, rita, status="claimed") == []
    assert (await verify(desk.rt, pid)).valid


async def test_sla_warnings_notify_at_the_state_fraction_unless_the_state_opts_out(desk):
    loud = await _start(desk, BUYING["$path"])
    quiet = await _start(desk, BUYING["$path"])
    await perform_action(desk.rt, desk.admin, quiet, "hush", {})
    desk.rt.clock.advance(51)
    report = await sla.scan(desk.rt)
    assert report.warnings == [loud]
    desk.rt.clock.advance(30)
    assert (await sla.scan(desk.rt)).warnings == [quiet]
    kinds = {(n.process_id, n.kind) for n in await list_notifications(desk.rt, desk.analysts[0])}
    assert kinds == {(loud, "workflow.sla.warning")}
    assert (await verify(desk.rt, quiet)).valid


def test_the_desk_namespace_is_the_one_granted() -> None:
    assert DRAFT["$path"].startswith(DESK)


REFERENCED: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/referenced-timeout",
    "initial": "draft",
    "states": {
        "draft": {"label": "Draft"},
        "waiting": {
            "label": "Waiting",
            "timeout": {"seconds": {"$ref": "data.wait_seconds"}, "action": "expire"},
        },
    },
    "actions": {
        "ask": {"from": "draft", "to": "waiting"},
        "answer": {"from": "waiting", "to": "draft"},
        "expire": {"from": "waiting", "to": "$cancel"},
    },
}


async def test_a_timeout_whose_seconds_are_a_reference_reads_the_data_on_entry(desk):
    """`timeout.seconds` as an expression over the data (issue 14): the reference is read
    when the state is entered — each entry with the data of that moment — a null arms
    nothing, and anything but seconds refuses the entering event."""
    from stateward.runtime.access import registry

    await registry.deploy_workflow(desk.rt, desk.operator, REFERENCED)
    path = REFERENCED["$path"]
    soon = await _start(desk, path, wait_seconds=30)
    await perform_action(desk.rt, desk.admin, soon, "ask", {})
    later = await _start(desk, path, wait_seconds=300)
    await perform_action(desk.rt, desk.admin, later, "ask", {})
    never = await _start(desk, path)  # no wait_seconds: no timer
    await perform_action(desk.rt, desk.admin, never, "ask", {})
    assert await _timers(desk, never) == {}
    bad = await _start(desk, path, wait_seconds="soon")
    with pytest.raises(DomainError) as refused:
        await perform_action(desk.rt, desk.admin, bad, "ask", {})
    assert refused.value.code == "INVALID_INPUT" and "not seconds" in refused.value.message
    assert (await desk.process(bad)).state == "draft"

    desk.rt.clock.advance(29)
    assert (await scheduler.fire_due(desk.rt)).fired == []
    desk.rt.clock.advance(2)
    assert len((await scheduler.fire_due(desk.rt)).fired) == 1
    assert [(await desk.process(p)).status for p in (soon, later, never)] == [
        "cancelled",
        "active",
        "active",
    ]
    desk.rt.clock.advance(300)
    assert len((await scheduler.fire_due(desk.rt)).fired) == 1
    assert (await desk.process(later)).status == "cancelled"
    assert (await desk.process(never)).status == "active"
    for pid in (soon, later, never, bad):
        assert (await verify(desk.rt, pid)).valid


COMPUTED: dict[str, Any] = {
    **REFERENCED,
    "$path": "ops/desk/computed-timeout",
    "states": {
        "draft": {"label": "Draft"},
        "waiting": {
            "label": "Waiting",
            "timeout": {
                "seconds": "CASE WHEN urgent = TRUE THEN 60 ELSE minutes * 60 END",
                "action": "expire",
            },
        },
    },
}


async def test_a_timeout_whose_seconds_are_a_value_expression_is_computed_on_entry(desk):
    """`timeout.seconds` as a value expression (issue 14: "N | expression"): arithmetic
    and CASE over the data when the state is entered; NULL arms nothing."""
    from stateward.runtime.access import registry

    await registry.deploy_workflow(desk.rt, desk.operator, COMPUTED)
    path = COMPUTED["$path"]
    urgent = await _start(desk, path, urgent=True, minutes=30)
    slow = await _start(desk, path, minutes=5)
    unknown = await _start(desk, path)  # minutes missing: NULL * 60 is NULL
    for pid in (urgent, slow, unknown):
        await perform_action(desk.rt, desk.admin, pid, "ask", {})
    assert await _timers(desk, unknown) == {}
    desk.rt.clock.advance(61)
    assert len((await scheduler.fire_due(desk.rt)).fired) == 1
    desk.rt.clock.advance(200)  # 261 s: the 300 s one is not due yet
    assert (await scheduler.fire_due(desk.rt)).fired == []
    desk.rt.clock.advance(60)
    assert len((await scheduler.fire_due(desk.rt)).fired) == 1
    statuses = [(await desk.process(p)).status for p in (urgent, slow, unknown)]
    assert statuses == ["cancelled", "cancelled", "active"]
    for pid in (urgent, slow, unknown):
        assert (await verify(desk.rt, pid)).valid
