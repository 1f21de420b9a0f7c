"""Automation lost to a crash: the ticker's recovery sweep re-runs a system state's hook
once the grace period has passed, exactly once across concurrent ticks and nodes.

The crash is simulated by committing the event that enters the system state while no
automation is installed on the runtime (the node "dies" before running the hook), then
installing the real hook runner and ticking later with the `ManualClock`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kernel_fixtures import Desk

from stateward.governance.keys import generate_keypair
from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.ops_support import kernel_repo
from stateward.runtime.core.services import Runtime
from stateward.runtime.hooks import automation
from stateward.runtime.hooks.runner import HookRunner
from stateward.runtime.insight.verify import verify
from stateward.runtime.ticker import tick
from stateward.settings import Settings

NS = "ops/recover"
SCORING = """
def score(ctx):
    return {"risk": len(ctx["data"].get("name", "")) * 10}
"""
FLOW: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{NS}/flow",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "scoring": {"label": "Scoring", "audience": "system", "hook": "scoring:score"},
        "approved": {"label": "Approved", "terminal": True},
    },
    "actions": {
        "submit": {"from": "intake", "to": "scoring", "mutate": {"$set": {"name": "input.name"}}},
        "accept": {"from": "scoring", "to": "approved"},
    },
}


@pytest.fixture
async def runner() -> AsyncIterator[HookRunner]:
    async with HookRunner(workers=1) as hooks:
        yield hooks


@pytest.fixture
async def desk(admin_rt: Runtime, operator: Any) -> Desk:
    await registry.add_module(admin_rt, operator, NS, "scoring", SCORING)
    await registry.deploy_workflow(admin_rt, operator, FLOW)
    return Desk(admin_rt, operator)


async def _stranded(desk: Desk) -> str:
    """An instance whose entry into `scoring` committed while no automation ran."""
    assert desk.rt.automation == []
    pid = (await start_instance(desk.rt, desk.admin, FLOW["$path"], {})).record.id
    await perform_action(desk.rt, desk.admin, pid, "submit", {"name": "Ann"})
    record = await desk.process(pid)
    assert (record.state, record.status) == ("scoring", "active")
    assert record.automation_at is not None
    return pid


def _grace(rt: Runtime) -> float:
    return automation.recovery_grace(rt.settings)


def _counting(rt: Runtime, runner: HookRunner, calls: list[str]) -> None:
    """Install the real automation, recording each run it is asked for."""

    async def run(runtime: Runtime, process_id: str, hook: str) -> None:
        calls.append(process_id)
        await automation.automate(runtime, runner, process_id, hook)

    rt.automation.append(run)


def test_the_grace_period_is_twice_the_hook_timeout_and_at_least_five_seconds() -> None:
    assert automation.recovery_grace(Settings(hook_timeout_ms=1000)) == 5.0
    assert automation.recovery_grace(Settings(hook_timeout_ms=4000)) == 8.0


async def test_a_stranded_instance_is_automated_by_the_sweep_exactly_once(desk, runner):
    pid = await _stranded(desk)
    automation.install(desk.rt, runner)
    desk.rt.clock.advance(_grace(desk.rt) + 1)
    report = await tick(desk.rt)
    assert report.automations == [pid] and report.errors == {}
    record = await desk.process(pid)
    assert (record.state, record.status, record.data["risk"]) == ("approved", "completed", 30)
    assert record.automation_at is None
    desk.rt.clock.advance(_grace(desk.rt) + 1)
    assert (await tick(desk.rt)).automations == []
    assert await desk.actions(pid) == ["$start", "submit", "$automate"]
    assert (await verify(desk.rt, pid)).valid


async def test_a_fresh_entry_inside_the_grace_period_is_left_alone(desk, runner):
    pid = await _stranded(desk)
    automation.install(desk.rt, runner)
    desk.rt.clock.advance(_grace(desk.rt) - 1)
    assert (await tick(desk.rt)).automations == []
    assert (await desk.process(pid)).state == "scoring"
    assert await desk.actions(pid) == ["$start", "submit"]
    desk.rt.clock.advance(2)
    assert (await tick(desk.rt)).automations == [pid]


async def test_a_node_without_automation_leaves_the_candidate_to_one_that_has_it(desk, runner):
    pid = await _stranded(desk)
    desk.rt.clock.advance(_grace(desk.rt) + 1)
    assert (await tick(desk.rt)).automations == []
    automation.install(desk.rt, runner)
    assert (await tick(desk.rt)).automations == [pid]


async def test_the_normal_run_clears_the_mark_so_the_sweep_finds_nothing(desk, runner):
    automation.install(desk.rt, runner)
    pid = (await start_instance(desk.rt, desk.admin, FLOW["$path"], {})).record.id
    await perform_action(desk.rt, desk.admin, pid, "submit", {"name": "Bo"})
    assert (await desk.process(pid)).automation_at is None
    desk.rt.clock.advance(_grace(desk.rt) + 1)
    assert (await tick(desk.rt)).automations == []
    assert (await desk.actions(pid)).count("$automate") == 1


async def test_a_stranded_instance_that_went_stale_is_still_recovered(desk, runner):
    pid = await _stranded(desk)
    desk.rt.clock.advance(desk.rt.settings.stale_after + 1)
    assert (await tick(desk.rt)).stale == [pid]  # a `$stale` event in the system state
    automation.install(desk.rt, runner)
    assert (await tick(desk.rt)).automations == [pid]
    assert (await desk.process(pid)).state == "approved"


async def test_a_claim_lost_with_its_node_is_retried_after_another_grace_period(desk, runner):
    pid = await _stranded(desk)

    async def dies(_rt: Runtime, _pid: str, _hook: str) -> None:
        return None  # the claiming node crashes before the hook runs

    desk.rt.automation.append(dies)
    desk.rt.clock.advance(_grace(desk.rt) + 1)
    assert (await tick(desk.rt)).automations == [pid]
    desk.rt.automation.remove(dies)
    automation.install(desk.rt, runner)
    assert (await tick(desk.rt)).automations == []  # claimed a moment ago
    desk.rt.clock.advance(_grace(desk.rt) + 1)
    assert (await tick(desk.rt)).automations == [pid]
    assert await desk.actions(pid) == ["$start", "submit", "$automate"]


async def test_two_concurrent_ticks_produce_one_automate_and_one_hook_run(desk, runner):
    pids = [await _stranded(desk) for _ in range(3)]
    calls: list[str] = []
    _counting(desk.rt, runner, calls)
    desk.rt.clock.advance(_grace(desk.rt) + 1)
    reports = await asyncio.gather(tick(desk.rt), tick(desk.rt))
    assert sorted(reports[0].automations + reports[1].automations) == sorted(pids)
    assert sorted(calls) == sorted(pids)
    for pid in pids:
        assert (await desk.actions(pid)).count("$automate") == 1
        assert (await desk.process(pid)).state == "approved"


async def test_two_nodes_ticking_at_once_automate_once(desk, runner, db_url, clock):
    pid = await _stranded(desk)
    other = await Runtime.open(
        Settings(database_url=db_url), clock=clock, node_key=generate_keypair()
    )
    try:
        await registry.trust_node(desk.rt, desk.operator, other.node_key.public)  # may attest
        await other.refresh_trusted()
        await desk.rt.refresh_trusted()
        calls: list[str] = []
        _counting(desk.rt, runner, calls)
        _counting(other, runner, calls)
        clock.advance(_grace(desk.rt) + 1)
        reports = await asyncio.gather(*(tick(rt) for rt in (desk.rt, other, desk.rt, other)))
        assert sum(len(r.automations) for r in reports) == 1
        assert calls == [pid]
    finally:
        await other.close()
    assert (await desk.actions(pid)).count("$automate") == 1
    assert (await verify(desk.rt, pid)).valid


async def test_two_runs_of_one_automation_record_one_event(desk, runner):
    pid = await _stranded(desk)
    runs = [automation.automate(desk.rt, runner, pid, "scoring:score") for _ in range(2)]
    assert sorted(await asyncio.gather(*runs)) == [False, True]  # the loser is `not_due`
    assert (await desk.actions(pid)).count("$automate") == 1


async def test_the_recovery_query_is_a_range_query_on_the_pending_index(desk, db_kind):
    async with desk.rt.uow(readonly=True) as uow:
        sql = str(kernel_repo(uow).pending_automation_statement("CURRENT_TIMESTAMP", 100))
        conn = await uow.session.connection()
        if db_kind == "sqlite":
            rows = await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")
        else:
            await conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            rows = await conn.exec_driver_sql(f"EXPLAIN {sql}")
        plan = " ".join(str(r[-1]) for r in rows)
    assert "ix_processes_automation_pending" in plan, plan
    assert "SCAN processes" not in plan and "Seq Scan" not in plan, plan
