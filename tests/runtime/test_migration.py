"""Instance migration (issue 15): `$migrate` through `act`, on SQLite and PostgreSQL.

Each test deploys the desk's ticket workflow (v1) and a second version of it, moves a
ticket into `review` and migrates it; refusals answer MIGRATION_INVALID with a pointer
and write nothing; a migrated instance replays in `verify`.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any

import pytest
from kernel_fixtures import DESK, TICKET, Desk

from stateward.domain.errors import DomainError
from stateward.governance.keys import generate_keypair
from stateward.persistence.schedules import PENDING
from stateward.runtime.access import registry
from stateward.runtime.core.act import act
from stateward.runtime.core.commands import perform_action, sign_as, start_instance
from stateward.runtime.insight.verify import verify
from stateward.runtime.operate.migration import MIGRATE, migrate_instance
from stateward.runtime.sweeps import scheduler

PATH = TICKET["$path"]


def version_two(**changes: Any) -> dict[str, Any]:
    """TICKET with `review` renamed `check` (assigned, a 200 s SLA) plus `changes`."""
    definition = copy.deepcopy(TICKET)
    states = definition["states"]
    states["check"] = {**states.pop("review"), "label": "Check", "sla_seconds": 200}
    for action in definition["actions"].values():
        if action.get("from") == "review":
            action["from"] = "check"
        if action.get("to") == "review":
            action["to"] = "check"
    definition.update(changes)
    return definition


async def _desk(
    rt: Any, operator: Any, second: dict[str, Any] | None = None, **data: Any
) -> tuple[Desk, str]:
    """The desk, a ticket in `review` on version 1, and `second` deployed as version 2."""
    desk = await Desk(rt, operator).setup()
    pid = await desk.ticket_in_review(**data)
    await registry.update_workflow(rt, operator, second or version_two())
    return desk, pid


async def test_migrate_maps_the_state_cancels_the_assignment_and_keeps_the_entry_time(
    admin_rt, operator, clock
):
    desk, pid = await _desk(admin_rt, operator, amount=3)
    before = await desk.process(pid)
    old = await desk.open_assignment(pid)
    clock.advance(30)
    done = await migrate_instance(
        admin_rt, desk.admin, pid, 2, {"review": "check"}, {"$set": {"migrated": True}}
    )
    after = await desk.process(pid)
    assert (after.workflow_version, after.state, after.status) == (2, "check", "active")
    assert after.data["migrated"] is True and after.data["state"] == "check"
    assert after.state_entered_at == before.state_entered_at  # the original entry time
    assert after.sla_due_at == before.state_entered_at + timedelta(seconds=200)
    plan = done.plan
    assert (plan.from_state, plan.to_state, plan.from_version, plan.to_version) == (
        "review", "check", 1, 2,
    )  # fmt: skip
    assert plan.assignments_cancelled == (old.id,) and plan.assignment_opened == "analyst"
    fresh = await desk.open_assignment(pid)
    assert fresh.id != old.id and fresh.state == "check"
    types = [row.type for row in await desk.outbox(pid)]
    assert "workflow.migrated" in types
    assert (await desk.actions(pid))[-1] == MIGRATE
    # the new version's actions apply from now on
    await perform_action(admin_rt, desk.admin, pid, "approve", {"reviewData": {"verdict": "ok"}})
    assert (await desk.process(pid)).state == "done"
    report = await verify(admin_rt, pid)
    assert report.valid, [p.line() for p in report.problems]


async def test_an_assignment_of_a_state_that_still_assigns_is_kept(admin_rt, operator):
    same = copy.deepcopy(TICKET)
    same["states"]["review"]["sla_seconds"] = 50
    same["actions"]["escalate"] = {"from": "review", "to": "done"}
    desk, pid = await _desk(admin_rt, operator, same)
    before = await desk.process(pid)
    old = await desk.open_assignment(pid)
    done = await migrate_instance(admin_rt, desk.admin, pid, 2)
    assert done.plan.assignments_kept == (old.id,) and done.plan.assignments_cancelled == ()
    assert (await desk.open_assignment(pid)).id == old.id
    after = await desk.process(pid)
    assert after.sla_due_at == before.state_entered_at + timedelta(seconds=50)
    assert after.sla_warn_at == before.state_entered_at + timedelta(seconds=40)
    assert (await verify(admin_rt, pid)).valid


async def test_dry_run_returns_the_plan_and_writes_nothing(admin_rt, operator):
    desk, pid = await _desk(admin_rt, operator)
    before = await desk.process(pid)
    dry = await migrate_instance(admin_rt, desk.admin, pid, 2, {"review": "check"}, dry_run=True)
    assert dry.result is None and dry.plan.valid and dry.plan.to_state == "check"
    assert len(dry.plan.assignments_cancelled) == 1
    assert await desk.process(pid) == before
    refused = await migrate_instance(admin_rt, desk.admin, pid, 2, dry_run=True)
    assert [(p.code, p.pointer) for p in refused.plan.problems] == [
        ("MIGRATION_INVALID", "/stateMap/review")
    ]
    assert await desk.process(pid) == before


@pytest.mark.parametrize(
    ("to_version", "state_map", "mutate", "pointer"),
    [
        (2, None, None, "/stateMap/review"),  # the current state has no target
        (2, {"review": "nowhere"}, None, "/stateMap/review"),
        (2, {"ghost": "check", "review": "check"}, None, "/stateMap/ghost"),
        (2, {"review": "done"}, None, "/stateMap/review"),  # a terminal target
        (7, None, None, "/toVersion"),  # no such version
        (1, None, None, "/toVersion"),  # the version it runs
        (2, {"review": "check"}, {"$spawn": []}, "/mutate/$spawn"),
        (2, {"review": "check"}, {"$increment": {"label": 1}}, "/mutate"),
        (2, {"review": "check"}, {"$set": {"amount": "lots"}}, "/data/amount"),  # the form
    ],
)
async def test_refusals_answer_migration_invalid_with_a_pointer(
    admin_rt, operator, to_version, state_map, mutate, pointer
):
    second = version_two()
    second["states"]["check"]["form"] = {"fields": {"amount": {"type": "number"}}}
    desk, pid = await _desk(admin_rt, operator, second, label="x")
    before = await desk.process(pid)
    with pytest.raises(DomainError) as caught:
        await migrate_instance(admin_rt, desk.admin, pid, to_version, state_map, mutate)
    assert caught.value.code == "MIGRATION_INVALID"
    assert caught.value.pointer == pointer
    assert await desk.process(pid) == before


async def test_another_paths_version_is_refused(admin_rt, operator):
    """The target is looked up under the instance's own path: a client-signed `$migrate`
    cannot name a version of another workflow (its envelope's workflow must be the
    instance's, which `act` checks first)."""
    _, pid = await _desk(admin_rt, operator)
    other = copy.deepcopy(TICKET)
    other["$path"] = f"{DESK}/other"
    await registry.deploy_workflow(admin_rt, operator, other)
    signed = sign_as(admin_rt, operator, pid, MIGRATE, f"{DESK}/other",
                     {"fromVersion": 1, "toVersion": 1})  # fmt: skip
    with pytest.raises(DomainError) as caught:
        await act(admin_rt, signed, attested=False)
    assert caught.value.code == "INVALID_INPUT" and caught.value.pointer == "/action/workflow"


async def test_roles_admin_or_operator_only(admin_rt, operator):
    desk, pid = await _desk(admin_rt, operator)
    # a reader with another role: FORBIDDEN; an outsider: NOT_FOUND (reads nothing)
    for who, code in ((desk.member, "FORBIDDEN"), (desk.analysts[0], "FORBIDDEN"),
                      (desk.outsider, "NOT_FOUND")):  # fmt: skip
        with pytest.raises(DomainError) as caught:
            await migrate_instance(admin_rt, who, pid, 2, {"review": "check"})
        assert caught.value.code == code, who
        with pytest.raises(DomainError):
            await migrate_instance(admin_rt, who, pid, 2, {"review": "check"}, dry_run=True)
    operator_key = generate_keypair()
    await registry.grant_role(admin_rt, operator, DESK, operator_key.public, ["operator"])
    done = await migrate_instance(admin_rt, operator_key.public, pid, 2, {"review": "check"})
    assert done.result is not None and done.result.record.workflow_version == 2
    # client-signed by a key without the role: the operation itself refuses it
    plain = generate_keypair()
    await registry.grant_role(admin_rt, operator, DESK, plain.public, ["viewer"])
    signed = sign_as(admin_rt, plain, pid, MIGRATE, PATH, {"fromVersion": 2, "toVersion": 1})
    with pytest.raises(DomainError) as caught:
        await act(admin_rt, signed, attested=False)
    assert caught.value.code == "FORBIDDEN"


async def test_an_ended_instance_is_not_migrated(admin_rt, operator):
    desk, pid = await _desk(admin_rt, operator)
    await perform_action(admin_rt, desk.admin, pid, "reject", {})
    with pytest.raises(DomainError) as caught:
        await migrate_instance(admin_rt, desk.admin, pid, 2, {"review": "check"})
    assert caught.value.code == "INACTIVE_PROCESS"


async def test_timers_whose_action_vanished_are_cancelled_and_recorded(admin_rt, operator, clock):
    first = copy.deepcopy(TICKET)
    first["$path"] = f"{DESK}/timed_ticket"
    first["actions"]["remind"] = {"from": "review", "mutate": {"$increment": {"reminded": 1}}}
    first["actions"]["expire"] = {"from": "review", "to": "rejected"}
    first["actions"]["submit"]["schedule"] = [
        {"action": "remind", "after": 60, "key": "remind"},
        {"action": "expire", "after": 600, "key": "expire"},
    ]
    desk = await Desk(admin_rt, operator).setup(first)
    pid = (await start_instance(admin_rt, desk.admin, first["$path"], {})).record.id
    await perform_action(admin_rt, desk.admin, pid, "submit", {})
    second = copy.deepcopy(first)
    del second["actions"]["remind"]
    second["actions"]["submit"]["schedule"] = [{"action": "expire", "after": 600, "key": "expire"}]
    await registry.update_workflow(admin_rt, operator, second)
    done = await migrate_instance(admin_rt, desk.admin, pid, 2)
    assert [(t.action, t.key) for t in done.plan.timers_cancelled] == [("remind", "remind")]
    async with admin_rt.uow(readonly=True) as uow:
        pending = await uow.schedules.for_process(pid, PENDING)
    assert [t.action for t in pending] == ["expire"]
    migrated = next(r for r in await desk.outbox(pid) if r.type == "workflow.migrated")
    assert migrated.payload["details"]["timersCancelled"][0]["action"] == "remind"
    clock.advance(700)
    await scheduler.fire_due(admin_rt)
    assert (await desk.process(pid)).state == "rejected"
    assert (await verify(admin_rt, pid)).valid


async def test_a_migrated_instance_can_migrate_back_and_still_verifies(admin_rt, operator):
    desk, pid = await _desk(admin_rt, operator)
    await migrate_instance(admin_rt, desk.admin, pid, 2, {"review": "check"})
    await perform_action(admin_rt, desk.admin, pid, "note", {})
    await migrate_instance(admin_rt, desk.admin, pid, 1, {"check": "review"})
    record = await desk.process(pid)
    assert (record.workflow_version, record.state, record.data["notes"]) == (1, "review", 1)
    report = await verify(admin_rt)
    assert report.valid, [p.line() for p in report.problems]


async def test_an_exported_log_with_a_migration_verifies_offline_and_restores(
    admin_rt, operator, sqlite_db_url
):
    from stateward.runtime.insight.logfile import export_lines, parse_lines
    from stateward.runtime.insight.logverify import verify_log
    from stateward.runtime.insight.restore import restore
    from stateward.settings import Settings

    desk, pid = await _desk(admin_rt, operator)
    await migrate_instance(admin_rt, desk.admin, pid, 2, {"review": "check"})
    await perform_action(admin_rt, desk.admin, pid, "approve", {"reviewData": {"verdict": "ok"}})
    lines = [json.dumps(x) async for x in export_lines(admin_rt)]
    log = parse_lines(lines)
    report = verify_log(log)
    assert report.valid, [p.line() for p in report.problems]
    rebuilt = await restore(Settings(database_url=sqlite_db_url), log)
    assert rebuilt.events == len(log.events)


@pytest.mark.parametrize(
    ("seconds", "data", "due_after"),
    [
        (300, {}, 300),
        ({"$ref": "data.wait"}, {"wait": 120}, 120),
        ("minutes * 60", {"minutes": 2}, 120),
        ("minutes * 60", {}, None),  # NULL: nothing to wait for, no timer
    ],
)
async def test_the_target_states_timeout_is_armed_from_the_entry_time(
    admin_rt, operator, clock, seconds, data, due_after
):
    """A literal, a `{"$ref"}` and a value expression are all read from the instance's
    data, as entering the state would, and counted from the (kept) entry time."""
    second = version_two()
    second["states"]["check"]["timeout"] = {"seconds": seconds, "action": "reject"}
    desk, pid = await _desk(admin_rt, operator, second, **data)
    entered = (await desk.process(pid)).state_entered_at
    clock.advance(30)
    done = await migrate_instance(admin_rt, desk.admin, pid, 2, {"review": "check"})
    async with admin_rt.uow(readonly=True) as uow:
        pending = [t for t in await uow.schedules.for_process(pid, PENDING) if t.action == "reject"]
    if due_after is None:
        assert pending == [] and done.plan.timers_armed == ()
        return
    assert [t.key for t in pending] == ["$timeout:check"]
    assert pending[0].due_at == entered + timedelta(seconds=due_after)
    assert [(t.action, t.key) for t in done.plan.timers_armed] == [("reject", "$timeout:check")]
    clock.advance(due_after)
    await scheduler.fire_due(admin_rt)
    assert (await desk.process(pid)).state == "rejected"
    assert (await verify(admin_rt, pid)).valid


async def test_a_timeout_the_instance_data_cannot_give_refuses_the_migration(admin_rt, operator):
    """A target timeout that resolves to something other than seconds refuses the move
    (MIGRATION_INVALID, as entering the state refuses its event), in a dry run as a
    problem of the plan; nothing is written."""
    second = version_two()
    second["states"]["check"]["timeout"] = {"seconds": {"$ref": "data.wait"}, "action": "reject"}
    desk, pid = await _desk(admin_rt, operator, second, wait=-5)
    plan = (
        await migrate_instance(admin_rt, desk.admin, pid, 2, {"review": "check"}, dry_run=True)
    ).plan
    assert [(p.code, p.pointer) for p in plan.problems] == [("MIGRATION_INVALID", "/toVersion")]
    assert "not seconds" in plan.problems[0].message
    with pytest.raises(DomainError) as refused:
        await migrate_instance(admin_rt, desk.admin, pid, 2, {"review": "check"})
    assert refused.value.code == "MIGRATION_INVALID"
    after = await desk.process(pid)
    assert (after.workflow_version, after.state) == (1, "review")
