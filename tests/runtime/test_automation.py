"""Automated states: the hook runs in the sandbox, one `$automate` event records it, the
engine merges and advances; failures, timeouts and cycles end in status `error`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kernel_fixtures import Desk

from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.hooks import automation
from stateward.runtime.hooks.runner import HookRunner
from stateward.runtime.insight.verify import verify

NS = "ops/auto"
SCORING = """
def score(ctx):
    return {"risk": len(ctx["data"].get("name", "")) * 10, "seen": ctx["state"],
            "asked": ctx["input"].get("name")}

def spin(ctx):
    for i in range(2000000000):
        pass
    return {}

def boom(ctx):
    fail("boom")

def route(ctx):
    return {"$action": "decline", "why": "routed"}

def tick(ctx):
    return {"n": ctx["data"].get("n", 0) + 1}
"""


def _flow(name: str, hook: str, extra_states: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "$version": "2.0",
        "$path": f"{NS}/{name}",
        "initial": "intake",
        "states": {
            "intake": {"label": "Intake"},
            "scoring": {"label": "Scoring", "audience": "system", "hook": hook},
            **(extra_states or {}),
            "approved": {"label": "Approved", "terminal": True},
            "rejected": {"label": "Rejected", "terminal": True},
        },
        "actions": {
            "submit": {
                "from": "intake",
                "to": "scoring",
                "mutate": {"$set": {"name": "input.name"}},
            },
            "accept": {"from": "scoring", "to": "approved", "when": "risk < 50"},
            "decline": {"from": "scoring", "to": "rejected"},
        },
    }


LOOP: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{NS}/loop",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "ping": {"label": "Ping", "audience": "system", "hook": "scoring:tick"},
        "pong": {"label": "Pong", "audience": "system", "hook": "scoring:tick"},
    },
    "actions": {
        "go": {"from": "intake", "to": "ping"},
        "to_pong": {"from": "ping", "to": "pong"},
        "to_ping": {"from": "pong", "to": "ping"},
    },
}


@pytest.fixture
async def runner() -> AsyncIterator[HookRunner]:
    async with HookRunner(workers=1) as hooks:
        yield hooks


@pytest.fixture
async def auto(admin_rt, operator, runner) -> Desk:
    await registry.add_module(admin_rt, operator, NS, "scoring", SCORING)
    for name, hook in (
        ("score", "scoring:score"),
        ("spin", "scoring:spin"),
        ("boom", "scoring:boom"),
        ("route", "scoring:route"),
    ):
        await registry.deploy_workflow(admin_rt, operator, _flow(name, hook))
    await registry.deploy_workflow(admin_rt, operator, LOOP)
    automation.install(admin_rt, runner)
    return Desk(admin_rt, operator)


async def _submit(auto: Desk, flow: str, name: str = "Ann") -> str:
    pid = (await start_instance(auto.rt, auto.admin, f"{NS}/{flow}", {})).record.id
    await perform_action(auto.rt, auto.admin, pid, "submit", {"name": name})
    return pid


async def _last(auto: Desk, pid: str) -> Any:
    async with auto.rt.uow(readonly=True) as uow:
        return (await uow.events.for_process(pid))[-1]


async def test_entering_a_system_state_runs_the_hook_merges_and_advances(auto):
    pid = await _submit(auto, "score")
    record = await auto.process(pid)
    assert (record.state, record.status) == ("approved", "completed")
    assert (record.data["risk"], record.data["seen"], record.data["asked"]) == (
        30,
        "scoring",
        "Ann",
    )
    assert await auto.actions(pid) == ["$start", "submit", "$automate"]
    event = await _last(auto, pid)
    assert event.actor == "system"
    assert event.input["result"] == {"risk": 30, "seen": "scoring", "asked": "Ann"}
    assert event.input["module"]["name"] == "scoring" and len(event.input["module"]["hash"]) == 64
    assert (await verify(auto.rt, pid)).valid  # replays from the recorded result


async def test_the_hook_result_routes_with_dollar_action(auto):
    pid = await _submit(auto, "route")
    record = await auto.process(pid)
    assert (record.state, record.data["why"]) == ("rejected", "routed")
    assert "$action" not in record.data


async def test_a_failing_hook_puts_the_process_in_error_and_the_human_event_stands(auto):
    pid = await _submit(auto, "boom")
    record = await auto.process(pid)
    assert (record.state, record.status, record.data["name"]) == ("scoring", "error", "Ann")
    assert await auto.actions(pid) == ["$start", "submit", "$automate"]
    event = await _last(auto, pid)
    assert "boom" in event.input["error"] and "result" not in event.input
    errors = [m for m in await auto.outbox(pid) if m.type == "workflow.error"]
    assert "boom" in errors[0].payload["details"]["reason"]
    assert (await verify(auto.rt, pid)).valid


async def test_a_hook_with_an_endless_loop_is_stopped_within_its_limit(auto):
    import time

    started = time.monotonic()
    pid = await _submit(auto, "spin")
    assert time.monotonic() - started < auto.rt.settings.hook_timeout_ms / 1000 + 5
    record = await auto.process(pid)
    assert (record.state, record.status) == ("scoring", "error")
    assert (await _last(auto, pid)).input["code"] == "HOOK_TIMEOUT"


async def test_the_eleventh_consecutive_automated_event_trips_the_cycle_guard(auto):
    pid = (await start_instance(auto.rt, auto.admin, LOOP["$path"], {})).record.id
    await perform_action(auto.rt, auto.admin, pid, "go", {})
    record = await auto.process(pid)
    assert record.status == "error"
    assert record.data["n"] == 10  # ten automated events ran their hook
    assert (await auto.actions(pid)).count("$automate") == 11
    assert (await _last(auto, pid)).input.get("guard") is True
    errors = [m for m in await auto.outbox(pid) if m.type == "workflow.error"]
    assert "cycle guard" in errors[0].payload["details"]["reason"]
    assert (await verify(auto.rt, pid)).valid
