"""Dynamic stages and `on_advance` in the kernel runtime (issue 13): a form submission
routed by the state's hook (`$next`, `$action`, fallback), an `on_advance` hook merged
before the branch rules — every hook result recorded in a `$automate` event, so `verify`
replays the whole log without Starlark. SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kernel_fixtures import Desk

from stateward.runtime.access import registry
from stateward.runtime.core.commands import advance_instance, start_instance
from stateward.runtime.hooks import automation
from stateward.runtime.hooks.runner import HookRunner
from stateward.runtime.insight.verify import verify

NS = "ops/forms"
ROUTER = """
def route(ctx):
    topic = ctx["data"].get("topic")
    if topic == "billing":
        return {"$next": "billing", "routed": ctx["input"]["fields"]["topic"]}
    if topic == "refund":
        return {"$action": "refund", "routed": "refund"}
    if topic == "numbered":
        return {"$next": 3}
    return {"routed": "default"}

def enrich(ctx):
    return {"score": len(ctx["data"].get("summary", "")), "enriched": True}
"""
REQUEST: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{NS}/request",
    "initial": "describe",
    "states": {
        "describe": {
            "label": "Describe",
            "type": "dynamic",
            "mode": "form",
            "hook": "router:route",
            "form": {
                "fields": {
                    "topic": {"type": "string", "required": True},
                    "summary": {"type": "string"},
                }
            },
            "branch_rules": [{"field": "topic", "op": "eq", "value": "spam", "target": "closed"}],
        },
        "general": {"label": "General"},
        "billing": {"label": "Billing"},
        "numbered": {"label": "Numbered"},
        "refunds": {"label": "Refunds"},
        "closed": {"label": "Closed", "terminal": True},
    },
    "actions": {
        "refund": {"from": "describe", "to": "refunds"},
        "close": {"from": ["general", "billing", "numbered", "refunds"], "to": "closed"},
    },
}
ENRICHED: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{NS}/enriched",
    "initial": "intake",
    "states": {
        "intake": {
            "label": "Intake",
            "form": {"fields": {"summary": {"type": "string", "required": True}}},
            "stage_config": {"on_advance": "router:enrich"},
            "branch_rules": [{"field": "score", "op": "gt", "value": 10, "target": "long"}],
        },
        "short": {"label": "Short"},
        "long": {"label": "Long", "terminal": True},
    },
    "actions": {"finish": {"from": "short", "to": "long"}},
}


@pytest.fixture
async def runner() -> AsyncIterator[HookRunner]:
    async with HookRunner(workers=1) as hooks:
        yield hooks


@pytest.fixture
async def desk(admin_rt, operator, runner) -> Desk:
    await registry.add_module(admin_rt, operator, NS, "router", ROUTER)
    await registry.deploy_workflow(admin_rt, operator, REQUEST)
    await registry.deploy_workflow(admin_rt, operator, ENRICHED)
    automation.install(admin_rt, runner)
    return Desk(admin_rt, operator)


async def _submit(desk: Desk, path: str, fields: dict[str, Any]) -> str:
    pid = (await start_instance(desk.rt, desk.admin, path, {})).record.id
    await advance_instance(desk.rt, desk.admin, pid, {"fields": fields})
    return pid


async def test_a_dynamic_form_stage_is_routed_by_its_hook_with_next(desk):
    pid = await _submit(desk, REQUEST["$path"], {"topic": "billing", "summary": "invoice"})
    record = await desk.process(pid)
    assert (record.state, record.data["routed"], record.data["topic"]) == (
        "billing", "billing", "billing",
    )  # fmt: skip
    assert await desk.actions(pid) == ["$start", "describe#hook", "$automate"]
    async with desk.rt.uow(readonly=True) as uow:
        recorded = (await uow.events.for_process(pid))[-1]
    assert recorded.input["result"]["$next"] == "billing"
    assert "$next" not in record.data
    assert (await verify(desk.rt, pid)).valid


@pytest.mark.parametrize(
    ("topic", "state"),
    [("refund", "refunds"), ("numbered", "numbered"), ("other", "general"), ("spam", "closed")],
)
async def test_dynamic_routing_by_action_ordinal_fallback_and_rules_first(desk, topic, state):
    pid = await _submit(desk, REQUEST["$path"], {"topic": topic})
    assert (await desk.process(pid)).state == state
    actions = await desk.actions(pid)
    if topic == "spam":  # a branch rule held: no hook run at all
        assert actions == ["$start", "describe#1"]
    assert (await verify(desk.rt, pid)).valid


async def test_on_advance_runs_before_routing_and_its_result_is_merged(desk):
    long = await _submit(desk, ENRICHED["$path"], {"summary": "a rather long summary"})
    short = await _submit(desk, ENRICHED["$path"], {"summary": "short"})
    record = await desk.process(long)
    assert (record.state, record.status, record.data["enriched"]) == ("long", "completed", True)
    assert (await desk.process(short)).state == "short"
    assert await desk.actions(long) == ["$start", "intake#advance", "$automate"]
    assert (await verify(desk.rt, long)).valid and (await verify(desk.rt, short)).valid
