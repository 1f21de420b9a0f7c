"""Incidents (issue 15): every failure that stops an instance opens one in the write path;
an operator retries it (with the module deployed now) or resolves it; both replay."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kernel_fixtures import Desk

from stateward.domain.errors import DomainError
from stateward.governance.keys import generate_keypair
from stateward.persistence.incidents import IncidentQuery
from stateward.records import OutboxFilter
from stateward.runtime.access import registry
from stateward.runtime.core.commands import cancel_instance, perform_action, start_instance
from stateward.runtime.hooks import automation
from stateward.runtime.hooks.runner import HookRunner
from stateward.runtime.insight.verify import verify
from stateward.runtime.operate.incidents import (
    list_incidents,
    resolve_incident,
    retry_incident,
)

NS = "ops/inc"
OTHER = "ops/other"
BROKEN = """
def check(ctx):
    fail("upstream down")
"""
FIXED = """
def check(ctx):
    return {"checked": True}
"""
SPIN = """
def check(ctx):
    for i in range(2000000000):
        pass
    return {}
"""


def _flow(ns: str = NS) -> dict[str, Any]:
    return {
        "$version": "2.0",
        "$path": f"{ns}/claim",
        "initial": "intake",
        "states": {
            "intake": {"label": "Intake"},
            "checking": {"label": "Checking", "audience": "system", "hook": "checks:check"},
            "done": {"label": "Done", "terminal": True},
            "manual": {"label": "Manual", "terminal": True},
        },
        "actions": {
            "submit": {"from": "intake", "to": "checking"},
            "pass": {"from": "checking", "to": "done"},
            "by_hand": {
                "from": "checking",
                "to": "manual",
                "mutate": {"$set": {"note": "input.note"}},
            },
        },
    }


@pytest.fixture
async def runner() -> AsyncIterator[HookRunner]:
    async with HookRunner(workers=1) as hooks:
        yield hooks


@pytest.fixture
async def desk(admin_rt, operator, runner) -> Desk:
    await registry.add_module(admin_rt, operator, NS, "checks", BROKEN)
    await registry.deploy_workflow(admin_rt, operator, _flow())
    automation.install(admin_rt, runner)
    return Desk(admin_rt, operator)


async def _failed(desk: Desk) -> str:
    pid = (await start_instance(desk.rt, desk.admin, f"{NS}/claim", {})).record.id
    await perform_action(desk.rt, desk.admin, pid, "submit", {})
    return pid


async def _incidents(desk: Desk, **filters: Any) -> list[Any]:
    page = await list_incidents(desk.rt, None, IncidentQuery(**filters), 50, None)
    return page.items


async def _bus(desk: Desk, pid: str) -> list[str]:
    async with desk.rt.uow(readonly=True) as uow:
        rows = await uow.outbox.events_after(0, OutboxFilter(instance_id=pid))
    return [r.type for r in rows if r.type.startswith("incident.")]


async def test_a_failing_hook_opens_one_incident_and_publishes_it(desk):
    pid = await _failed(desk)
    assert (await desk.process(pid)).status == "error"
    [incident] = await _incidents(desk, process_id=pid)
    assert (incident.kind, incident.state, incident.attempts) == ("HOOK_FAILED", "checking", 1)
    assert "upstream down" in incident.message and not incident.resolved
    assert await _bus(desk, pid) == ["incident.created"]


async def test_retry_with_a_fixed_module_resolves_it_records_the_hash_and_verifies(desk, operator):
    pid = await _failed(desk)
    [incident] = await _incidents(desk, process_id=pid)
    # still broken: the retry fails again, the same incident counts a second attempt
    await retry_incident(desk.rt, desk.admin, incident.id)
    [again] = await _incidents(desk, process_id=pid)
    assert (again.id, again.attempts, again.resolved) == (incident.id, 2, False)
    assert (await desk.process(pid)).status == "error"
    await registry.update_module(desk.rt, operator, NS, "checks", FIXED)
    async with desk.rt.uow(readonly=True) as uow:
        module = await uow.modules.get(NS, "checks")
    assert module is not None
    result = await retry_incident(desk.rt, desk.admin, incident.id)
    assert result.event.action == "$retry"
    assert result.event.input["module"]["hash"] == module.hash
    record = await desk.process(pid)
    assert (record.state, record.status, record.data["checked"]) == ("done", "completed", True)
    [done] = await _incidents(desk, process_id=pid)
    assert done.resolved and done.resolution == "retried" and done.attempts == 2
    assert await _bus(desk, pid) == ["incident.created", "incident.resolved"]
    assert (await verify(desk.rt, pid)).valid


async def test_resolve_performs_the_operators_action_instead(desk):
    pid = await _failed(desk)
    [incident] = await _incidents(desk, process_id=pid)
    for bad in ("$retry", "nope"):
        with pytest.raises(DomainError) as caught:
            await resolve_incident(desk.rt, desk.admin, incident.id, bad, {})
        assert caught.value.code in ("INVALID_INPUT", "NOT_FOUND", "INVALID_ACTION")
    await resolve_incident(desk.rt, desk.admin, incident.id, "by_hand", {"note": "phoned"})
    record = await desk.process(pid)
    assert (record.state, record.status, record.data["note"]) == ("manual", "completed", "phoned")
    [done] = await _incidents(desk, process_id=pid)
    assert done.resolution == "action:by_hand"
    assert (await verify(desk.rt, pid)).valid
    with pytest.raises(DomainError) as twice:
        await retry_incident(desk.rt, desk.admin, incident.id)
    assert twice.value.code == "CONFLICT"


async def test_resolve_with_cancel_cancels_and_a_plain_cancel_resolves_too(desk):
    pid = await _failed(desk)
    [incident] = await _incidents(desk, process_id=pid)
    await resolve_incident(desk.rt, desk.admin, incident.id, "$cancel")
    assert (await desk.process(pid)).status == "cancelled"
    assert (await _incidents(desk, process_id=pid))[0].resolution == "cancelled"
    other = await _failed(desk)
    await cancel_instance(desk.rt, desk.admin, other, "gave up")
    [closed] = await _incidents(desk, process_id=other)
    assert closed.resolved and closed.resolution == "cancelled"
    assert (await verify(desk.rt, pid)).valid


async def test_a_timed_out_hook_is_a_hook_timeout_incident(admin_rt, operator, runner):
    await registry.add_module(admin_rt, operator, NS, "checks", SPIN)
    await registry.deploy_workflow(admin_rt, operator, _flow())
    automation.install(admin_rt, runner)
    desk = Desk(admin_rt, operator)
    pid = await _failed(desk)
    [incident] = await _incidents(desk, process_id=pid)
    assert incident.kind == "HOOK_TIMEOUT"
    assert (await _incidents(desk, kinds=("HOOK_FAILED",), process_id=pid)) == []


async def test_only_operators_of_the_namespace_retry_and_others_do_not_see_it(desk, operator):
    pid = await _failed(desk)
    [incident] = await _incidents(desk, process_id=pid)
    viewer, stranger, helper = (generate_keypair().public for _ in range(3))
    await registry.grant_role(desk.rt, operator, NS, viewer, ["viewer"])
    await registry.grant_role(desk.rt, operator, OTHER, stranger, ["operator"])
    await registry.grant_role(desk.rt, operator, NS, helper, ["operator"])
    for who, code in ((viewer, "FORBIDDEN"), (stranger, "NOT_FOUND")):
        with pytest.raises(DomainError) as caught:
            await retry_incident(desk.rt, who, incident.id)
        assert caught.value.code == code
        with pytest.raises(DomainError) as caught:
            await resolve_incident(desk.rt, who, incident.id, "$cancel")
        assert caught.value.code == code
    # listing is scoped by the caller's namespaces, a filter never widens it
    page = await list_incidents(desk.rt, [OTHER], IncidentQuery(namespace=NS), 50, None)
    assert page.items == []
    await resolve_incident(desk.rt, helper, incident.id, "$cancel")
    assert (await desk.process(pid)).status == "cancelled"


async def test_incidents_page_newest_first_with_a_keyset(desk):
    pids = [await _failed(desk) for _ in range(3)]
    first = await list_incidents(desk.rt, [NS], IncidentQuery(), 2, None)
    assert first.has_next and len(first.items) == 2
    last = first.items[-1]
    rest = await list_incidents(desk.rt, [NS], IncidentQuery(), 2, (last.created_at, last.id))
    assert not rest.has_next
    seen = [i.process_id for i in first.items + rest.items]
    assert sorted(seen) == sorted(pids)
    open_only = await list_incidents(desk.rt, [NS], IncidentQuery(resolved=True), 10, None)
    assert open_only.items == []
    with pytest.raises(DomainError):
        await list_incidents(desk.rt, [NS], IncidentQuery(kinds=("NOPE",)), 10, None)
    with pytest.raises(DomainError):
        await list_incidents(desk.rt, [NS], IncidentQuery(), 10_000, None)


async def test_the_ticker_sets_the_open_incidents_gauge(desk):
    from stateward.observe import metrics
    from stateward.runtime.ticker import tick

    def gauge() -> float:
        return metrics.OPEN_INCIDENTS.labels(NS)._value.get()  # type: ignore[attr-defined]

    pid = await _failed(desk)
    await _failed(desk)
    was = metrics.enabled()
    metrics.enable(True)
    try:
        await tick(desk.rt)
        assert gauge() == 2
        [incident] = await _incidents(desk, process_id=pid)
        await resolve_incident(desk.rt, desk.admin, incident.id, "$cancel")
        await tick(desk.rt)
        assert gauge() == 1
    finally:
        metrics.enable(was)


FLAKY = """
def check(ctx):
    fail("still down")
"""


async def test_state_retries_run_the_hook_again_before_the_incident(admin_rt, operator, runner):
    flow = _flow()
    flow["states"]["checking"]["retries"] = {"max": 2, "backoffSeconds": 0.01}
    await registry.add_module(admin_rt, operator, NS, "checks", FLAKY)
    await registry.deploy_workflow(admin_rt, operator, flow)
    automation.install(admin_rt, runner)
    desk = Desk(admin_rt, operator)
    pid = await _failed(desk)
    [incident] = await _incidents(desk, process_id=pid)
    assert incident.attempts == 3  # one run and two retries, then the incident
    async with desk.rt.uow(readonly=True) as uow:
        last = (await uow.events.for_process(pid))[-1]
    assert last.input["attempts"] == 3
    assert (await verify(desk.rt, pid)).valid


@pytest.mark.parametrize(
    ("retries", "pointer"),
    [
        ({"max": 11}, "/max"),
        ({"max": True}, "/max"),
        ({"max": 1, "backoffSeconds": 301}, "/backoffSeconds"),
        ({"max": 1, "backoffSeconds": "1"}, "/backoffSeconds"),
        ({"max": 1, "every": 2}, "/every"),
        ([1], ""),
    ],
)
def test_state_retries_are_validated_strictly(retries, pointer):
    from stateward.domain.definition import load_definition
    from stateward.domain.errors import InvalidDefinition

    flow = _flow()
    flow["states"]["checking"]["retries"] = retries
    with pytest.raises(InvalidDefinition) as caught:
        load_definition(flow)
    pointers = [p.pointer for p in caught.value.problems]
    assert f"/states/checking/retries{pointer}" in pointers


def test_retries_need_a_hook():
    from stateward.domain.definition import load_definition
    from stateward.domain.errors import InvalidDefinition

    flow = _flow()
    flow["states"]["intake"]["retries"] = {"max": 1}
    with pytest.raises(InvalidDefinition) as caught:
        load_definition(flow)
    assert "/states/intake/retries" in [p.pointer for p in caught.value.problems]
