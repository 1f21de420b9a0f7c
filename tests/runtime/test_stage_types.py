"""Stage types and the advance lifecycle in the kernel runtime (issue 13): validation at
deployment, the submission merged, auto_transition and past-the-last-state completion in
one event — on SQLite and PostgreSQL, each log replayed by `verify`."""

from __future__ import annotations

from typing import Any

import pytest
from kernel_fixtures import Desk

from stateward.domain.errors import DomainError
from stateward.runtime.access import registry
from stateward.runtime.core.commands import advance_instance, perform_action, start_instance
from stateward.runtime.insight.verify import verify

LINEAR: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/linear",
    "initial": "intake",
    "states": {
        "intake": {
            "label": "Intake",
            "form": {"fields": {"amount": {"type": "number", "required": True}}},
            "branch_rules": [
                {"field": "amount", "op": "gt", "value": 100, "target_stage": "route"}
            ],
        },
        "small": {"label": "Small"},
        "route": {
            "label": "Route",
            "audience": "system",
            "auto_transition": True,
            "branch_rules": [{"field": "amount", "op": "gt", "value": 1000, "target": "last"}],
        },
        "review": {"label": "Review", "assign": "analyst"},
        "last": {"label": "Last"},
    },
    "actions": {"approve": {"role": "analyst,admin", "from": "review", "to": "last"}},
}


def _bad(**state: Any) -> dict[str, Any]:
    return {
        "$version": "2.0",
        "$path": "ops/desk/bad",
        "initial": "a",
        "states": {
            "a": {"label": "A"},
            "s": {"label": "S", **state},
            "z": {"label": "Z", "terminal": True},
        },
        "actions": {"go": {"from": "a", "to": "s"}},
    }


@pytest.fixture
async def desk(admin_rt, operator) -> Desk:
    return await Desk(admin_rt, operator).setup(LINEAR)


@pytest.mark.parametrize(
    ("state", "pointer"),
    [
        ({"audience": "system"}, "/states/s/audience"),
        ({"hook": "m:f"}, "/states/s/hook"),
        ({"type": "dynamic"}, "/states/s/type"),
    ],
    ids=["system-state-without-hook", "hook-on-simple-state", "dynamic-without-hook"],
)
async def test_deployment_refuses_inconsistent_stage_types(desk, state, pointer):
    with pytest.raises(DomainError) as refused:
        await registry.deploy_workflow(desk.rt, desk.operator, _bad(**state))
    assert refused.value.code == "INVALID_DEFINITION"
    found = {(p.code, p.pointer) for p in refused.value.problems}
    assert ("INCONSISTENT_MODE", pointer) in found


async def test_a_submission_is_merged_and_routes_past_an_auto_transition_state(desk):
    pid = (await start_instance(desk.rt, desk.admin, LINEAR["$path"], {})).record.id
    done = await advance_instance(desk.rt, desk.admin, pid, {"fields": {"amount": 500}})
    record = await desk.process(pid)
    # intake -> route (rule) -> review (route's ordinal + 1) in ONE event
    assert (record.state, record.status, record.data["amount"]) == ("review", "active", 500)
    assert done.event.action == "intake#1"
    types = [m.type for m in await desk.outbox(pid)]
    assert types.count("workflow.advanced") == 2 and "workflow.assigned" in types
    assert (await desk.open_assignment(pid)).team == "analyst"
    assert (await verify(desk.rt, pid)).valid


async def test_advancing_past_the_last_state_completes_the_instance(desk):
    pid = (await start_instance(desk.rt, desk.admin, LINEAR["$path"], {})).record.id
    await advance_instance(desk.rt, desk.admin, pid, {"fields": {"amount": 5000}})
    assert (await desk.process(pid)).state == "last"  # intake -> route -> last (rule)
    await advance_instance(desk.rt, desk.admin, pid, {})  # past the last state
    record = await desk.process(pid)
    assert (record.state, record.status) == ("last", "completed")
    assert "workflow.completed" in [m.type for m in await desk.outbox(pid)]
    assert (await verify(desk.rt, pid)).valid


async def test_the_last_state_completes_on_advance_and_then_accepts_nothing(desk):
    pid = (await start_instance(desk.rt, desk.admin, LINEAR["$path"], {})).record.id
    await advance_instance(desk.rt, desk.admin, pid, {"fields": {"amount": 500}})
    await perform_action(desk.rt, desk.admin, pid, "approve", {})
    assert (await desk.process(pid)).state == "last"
    await advance_instance(desk.rt, desk.admin, pid, {})
    assert (await desk.process(pid)).status == "completed"
    with pytest.raises(DomainError) as refused:
        await advance_instance(desk.rt, desk.admin, pid, {})
    assert refused.value.code == "INACTIVE_PROCESS"
    assert (await verify(desk.rt, pid)).valid


async def test_an_invalid_submission_changes_nothing(desk):
    pid = (await start_instance(desk.rt, desk.admin, LINEAR["$path"], {})).record.id
    with pytest.raises(DomainError) as refused:
        await advance_instance(desk.rt, desk.admin, pid, {"fields": {"amount": "many"}})
    assert refused.value.code == "INVALID_INPUT"
    record = await desk.process(pid)
    assert (record.state, "amount" in record.data) == ("intake", False)
