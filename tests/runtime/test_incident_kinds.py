"""TIMER_FAILED and WEBHOOK_EXHAUSTED incidents (issue 15): a timer whose action failed and
a webhook delivery that exhausted its retries are recorded by kernel events through the
one write path (`$timer {failed}`, `$webhook`), retried and resolved by operators, and
replayed by `verify` (online and offline); `bulkRetry` records the module like
`retryIncident`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kernel_fixtures import DESK, TICKET, Desk, Receiver

from stateward.domain.errors import DomainError
from stateward.persistence.incidents import IncidentQuery
from stateward.runtime.access import registry
from stateward.runtime.access.registry import set_webhook
from stateward.runtime.batches import bulk
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.ops_support import kernel_repo
from stateward.runtime.hooks import automation
from stateward.runtime.hooks.runner import HookRunner
from stateward.runtime.insight.verify import verify
from stateward.runtime.operate.incidents import list_incidents, resolve_incident, retry_incident
from stateward.runtime.operate.migration import migrate_instance
from stateward.runtime.sweeps import scheduler, sla, webhooks

PATH = f"{DESK}/expiry"


def _expiry(then: bool = True) -> dict[str, Any]:
    """A timer on `waiting` whose action breaks its own `then` (v1) or not (v2)."""
    expire: dict[str, Any] = {"from": "waiting", "to": "expired",
                              "mutate": {"$set": {"note": "input.note"}}}  # fmt: skip
    if then:
        expire["then"] = "note IS NOT NULL"
    else:
        expire["mutate"] = {"$set": {"note": "timed out"}}
    return {
        "$version": "2.0",
        "$path": PATH,
        "initial": "intake",
        "states": {
            "intake": {"label": "Intake"},
            "waiting": {"label": "Waiting"},
            "paused": {"label": "Paused"},
            "expired": {"label": "Expired", "terminal": True},
            "closed": {"label": "Closed", "terminal": True},
        },
        "actions": {
            "open": {
                "from": "intake",
                "to": "waiting",
                "schedule": [{"action": "expire", "after": 60, "key": "t"}],
            },
            "expire": expire,
            "pause": {"from": "waiting", "to": "paused"},
            "close": {"from": ["waiting", "paused"], "to": "closed"},
        },
    }


@pytest.fixture
async def desk(admin_rt, operator) -> Desk:
    return await Desk(admin_rt, operator).setup(TICKET, _expiry())


async def _incidents(desk: Desk, pid: str) -> list[Any]:
    page = await list_incidents(desk.rt, None, IncidentQuery(process_id=pid), 50, None)
    return page.items


async def _bus(desk: Desk, pid: str) -> list[str]:
    return [m.type for m in await desk.outbox(pid) if m.type.startswith("incident.")]


async def _timer_failed(desk: Desk) -> tuple[str, int]:
    pid = (await start_instance(desk.rt, desk.admin, PATH, {})).record.id
    await perform_action(desk.rt, desk.admin, pid, "open", {})
    desk.rt.clock.advance(61)
    report = await scheduler.fire_due(desk.rt)
    assert report.fired == [] and report.not_applicable == []
    [timer_id] = report.failed
    return pid, timer_id


async def _offline_valid(desk: Desk) -> None:
    from stateward.runtime.insight.logfile import export_lines, parse_lines
    from stateward.runtime.insight.logverify import verify_log

    lines = [json.dumps(x) async for x in export_lines(desk.rt)]
    report = verify_log(parse_lines(lines))
    assert report.valid, [p.line() for p in report.problems]


async def test_a_failing_timer_action_opens_a_timer_failed_incident(desk):
    pid, timer_id = await _timer_failed(desk)
    record = await desk.process(pid)
    assert (record.state, record.status) == ("waiting", "error")
    [incident] = await _incidents(desk, pid)
    assert (incident.kind, incident.state, incident.attempts) == ("TIMER_FAILED", "waiting", 1)
    assert "POSTCONDITION_FAILED" in incident.message and "expire" in incident.message
    assert await _bus(desk, pid) == ["incident.created"]
    async with desk.rt.uow(readonly=True) as uow:
        timer = await kernel_repo(uow).schedule(timer_id)
        [*_, last] = await uow.events.for_process(pid)
    assert timer is not None and timer.status == "failed"
    assert timer.detail is not None and timer.detail.startswith("POSTCONDITION_FAILED")
    assert (last.action, last.input["schedule"], last.input["action"]) == (
        "$timer", timer_id, "expire")  # fmt: skip
    assert last.input["failed"].startswith("POSTCONDITION_FAILED")
    assert (await scheduler.fire_due(desk.rt)).failed == []  # recorded once
    assert (await verify(desk.rt, pid)).valid


async def test_an_overtaken_timer_is_still_not_applicable_and_no_incident(desk):
    pid = (await start_instance(desk.rt, desk.admin, PATH, {})).record.id
    await perform_action(desk.rt, desk.admin, pid, "open", {})
    await perform_action(desk.rt, desk.admin, pid, "pause", {})
    desk.rt.clock.advance(61)
    report = await scheduler.fire_due(desk.rt)
    assert len(report.not_applicable) == 1 and report.failed == []
    assert (await desk.process(pid)).status == "active"
    assert await _incidents(desk, pid) == []


async def test_retrying_a_timer_incident_reruns_the_action_and_resolves_once_fixed(desk, operator):
    pid, timer_id = await _timer_failed(desk)
    [incident] = await _incidents(desk, pid)
    # still broken: the retry performs the action again in its event, which records the
    # failure: the same incident counts a second attempt
    again = await retry_incident(desk.rt, desk.admin, incident.id)
    assert again.event.action == "$retry"
    assert again.event.input["timer"] == {"schedule": timer_id, "action": "expire", "key": "t"}
    [counted] = await _incidents(desk, pid)
    assert (counted.id, counted.attempts, counted.resolved) == (incident.id, 2, False)
    assert (await desk.process(pid)).status == "error"
    # the operator deploys a fixed version, moves the instance to it, and retries
    await registry.update_workflow(desk.rt, operator, _expiry(then=False))
    await migrate_instance(desk.rt, desk.admin, pid, 2)
    assert not (await _incidents(desk, pid))[0].resolved
    await retry_incident(desk.rt, desk.admin, incident.id)
    record = await desk.process(pid)
    assert (record.state, record.status, record.data["note"]) == ("expired", "completed",
                                                                   "timed out")  # fmt: skip
    [done] = await _incidents(desk, pid)
    assert (done.resolved, done.resolution, done.attempts) == (True, "retried", 2)
    assert await _bus(desk, pid) == ["incident.created", "incident.resolved"]
    assert (await verify(desk.rt, pid)).valid
    await _offline_valid(desk)


async def test_resolving_a_timer_incident_performs_the_operators_action(desk):
    pid, _ = await _timer_failed(desk)
    [incident] = await _incidents(desk, pid)
    await resolve_incident(desk.rt, desk.admin, incident.id, "close")
    record = await desk.process(pid)
    assert (record.state, record.status) == ("closed", "completed")
    [done] = await _incidents(desk, pid)
    assert done.resolution == "action:close"
    other, _ = await _timer_failed(desk)
    [second] = await _incidents(desk, other)
    await resolve_incident(desk.rt, desk.admin, second.id, "$cancel")
    assert (await desk.process(other)).status == "cancelled"
    assert (await verify(desk.rt)).valid
    await _offline_valid(desk)


async def test_the_timer_failure_event_is_a_system_operation(desk):
    from stateward.runtime.core.act import act
    from stateward.runtime.core.commands import attest

    pid = (await start_instance(desk.rt, desk.admin, PATH, {})).record.id
    body = {"schedule": 1, "action": "expire", "failed": "forged"}
    with pytest.raises(DomainError) as caught:
        await act(desk.rt, attest(desk.rt, desk.admin, pid, "$timer", PATH, body), attested=True)
    assert caught.value.code == "FORBIDDEN"


async def _exhausted(desk: Desk, receiver: Receiver) -> tuple[str, int]:
    """A ticket whose SLA breach delivery failed on every attempt."""
    await set_webhook(desk.rt, desk.operator, DESK, receiver.url, "k")
    pid = await desk.ticket_in_review()
    desk.rt.clock.advance(101)
    await sla.scan(desk.rt)
    for _ in range(webhooks.MAX_ATTEMPTS):
        await webhooks.deliver_due(desk.rt)
        desk.rt.clock.advance(webhooks.MAX_DELAY_S)
    [delivery] = await webhooks.list_deliveries(desk.rt, DESK)
    assert (delivery.status, delivery.attempts, delivery.process_id) == (
        "failed", webhooks.MAX_ATTEMPTS, pid)  # fmt: skip
    return pid, delivery.id


async def test_an_exhausted_webhook_delivery_opens_an_incident_and_a_retry_delivers_it(desk):
    receiver = Receiver(statuses=[500] * (webhooks.MAX_ATTEMPTS + 1))
    try:
        pid, delivery_id = await _exhausted(desk, receiver)
        [incident] = await _incidents(desk, pid)
        assert (incident.kind, incident.state, incident.attempts, incident.delivery_id) == (
            "WEBHOOK_EXHAUSTED", "review", webhooks.MAX_ATTEMPTS, delivery_id)  # fmt: skip
        assert "HTTP 500" in incident.message and "workflow.sla.breached" in incident.message
        record = await desk.process(pid)
        assert record.status == "active"  # a notification never blocks the instance
        assert await _bus(desk, pid) == ["incident.created"]
        # the instance goes on; its own events leave the webhook incident alone
        await perform_action(desk.rt, desk.admin, pid, "note", {})
        assert not (await _incidents(desk, pid))[0].resolved
        # retry: re-queued with no attempt made; the receiver fails once more, then 200
        result = await retry_incident(desk.rt, desk.admin, incident.id)
        assert result.event.input == {"incident": incident.id, "delivery": delivery_id}
        [queued] = await webhooks.list_deliveries(desk.rt, DESK)
        assert (queued.status, queued.attempts) == ("pending", 0)
        with pytest.raises(DomainError) as twice:
            await retry_incident(desk.rt, desk.admin, incident.id)
        assert twice.value.code == "CONFLICT"
        assert [a.ok for a in await webhooks.deliver_due(desk.rt)] == [False]
        assert not (await _incidents(desk, pid))[0].resolved
        desk.rt.clock.advance(webhooks.MAX_DELAY_S)
        assert [a.ok for a in await webhooks.deliver_due(desk.rt)] == [True]
    finally:
        receiver.close()
    [done] = await webhooks.list_deliveries(desk.rt, DESK)
    assert (done.status, done.attempts) == ("delivered", 2)
    [resolved] = await _incidents(desk, pid)
    assert (resolved.resolved, resolved.resolution) == (True, "delivered")
    assert await _bus(desk, pid) == ["incident.created", "incident.resolved"]
    actions = await desk.actions(pid)
    assert actions.count("$webhook") == 2 and "$retry" in actions
    assert (await verify(desk.rt, pid)).valid
    await _offline_valid(desk)


async def test_an_exhausted_retry_counts_attempts_and_resolve_gives_the_delivery_up(desk):
    receiver = Receiver(statuses=[500] * (3 * webhooks.MAX_ATTEMPTS))
    try:
        pid, _ = await _exhausted(desk, receiver)
        [incident] = await _incidents(desk, pid)
        await retry_incident(desk.rt, desk.admin, incident.id)
        for _ in range(webhooks.MAX_ATTEMPTS):
            await webhooks.deliver_due(desk.rt)
            desk.rt.clock.advance(webhooks.MAX_DELAY_S)
    finally:
        receiver.close()
    [again] = await _incidents(desk, pid)
    assert (again.id, again.attempts, again.resolved) == (
        incident.id, 2 * webhooks.MAX_ATTEMPTS, False)  # fmt: skip
    with pytest.raises(DomainError) as caught:
        await resolve_incident(desk.rt, desk.admin, incident.id, "approve")
    assert caught.value.code == "INVALID_INPUT"
    await resolve_incident(desk.rt, desk.admin, incident.id, "$cancel")
    [given_up] = await _incidents(desk, pid)
    assert (given_up.resolved, given_up.resolution) == (True, "cancelled")
    [delivery] = await webhooks.list_deliveries(desk.rt, DESK)
    assert delivery.status == "failed"
    record = await desk.process(pid)
    assert (record.state, record.status) == ("review", "active")  # untouched
    assert await _bus(desk, pid) == ["incident.created", "incident.resolved"]
    assert (await verify(desk.rt, pid)).valid


async def test_only_operators_retry_a_webhook_incident(desk):
    receiver = Receiver(statuses=[500] * (webhooks.MAX_ATTEMPTS + 1))
    try:
        pid, _ = await _exhausted(desk, receiver)
    finally:
        receiver.close()
    [incident] = await _incidents(desk, pid)
    for who, code in ((desk.member, "FORBIDDEN"), (desk.outsider, "NOT_FOUND")):
        with pytest.raises(DomainError) as caught:
            await retry_incident(desk.rt, who, incident.id)
        assert caught.value.code == code


async def test_bulk_retry_records_the_module_like_retry_incident(admin_rt, operator):
    ns = "ops/inc"
    flow = {
        "$version": "2.0",
        "$path": f"{ns}/claim",
        "initial": "intake",
        "states": {
            "intake": {"label": "Intake"},
            "checking": {"label": "Checking", "audience": "system", "hook": "checks:check"},
            "done": {"label": "Done", "terminal": True},
        },
        "actions": {
            "submit": {"from": "intake", "to": "checking"},
            "pass": {"from": "checking", "to": "done"},
        },
    }
    broken = 'def check(ctx):\n    fail("down")\n'
    fixed = "def check(ctx):\n    return {}\n"
    await registry.add_module(admin_rt, operator, ns, "checks", broken)
    await registry.deploy_workflow(admin_rt, operator, flow)
    async with HookRunner(workers=1) as runner:
        automation.install(admin_rt, runner)
        pids = []
        for _ in range(2):
            pid = (await start_instance(admin_rt, operator.public, flow["$path"], {})).record.id
            await perform_action(admin_rt, operator.public, pid, "submit", {})
            pids.append(pid)
        await registry.update_module(admin_rt, operator, ns, "checks", fixed)
        async with admin_rt.uow(readonly=True) as uow:
            module = await uow.modules.get(ns, "checks")
        assert module is not None
        batch = await bulk.create(admin_rt, operator.public, "retry", {}, pids)
        progress = await bulk.process(admin_rt, batch.id)
        assert (progress.succeeded, progress.failed, progress.done) == (2, 0, True)
    for pid in pids:
        async with admin_rt.uow(readonly=True) as uow:
            events = await uow.events.for_process(pid)
            [incident] = await uow.incidents.page(IncidentQuery(process_id=pid), 5, None)
        [retried] = [e for e in events if e.action == "$retry"]
        assert retried.input["module"]["hash"] == module.hash
        assert retried.input["incident"] == incident.id and retried.input["hook"] == "checks:check"
        assert (await verify(admin_rt, pid)).valid


async def test_a_delivery_exhausted_after_the_instance_completed_is_still_an_incident(desk):
    receiver = Receiver(statuses=[500] * (webhooks.MAX_ATTEMPTS + 1))
    try:
        await set_webhook(desk.rt, desk.operator, DESK, receiver.url, "k")
        pid = await desk.ticket_in_review()
        desk.rt.clock.advance(101)
        await sla.scan(desk.rt)
        await perform_action(desk.rt, desk.admin, pid, "reject", {})
        assert (await desk.process(pid)).status == "completed"
        for _ in range(webhooks.MAX_ATTEMPTS):
            await webhooks.deliver_due(desk.rt)
            desk.rt.clock.advance(webhooks.MAX_DELAY_S)
        [incident] = await _incidents(desk, pid)
        assert (incident.kind, incident.state) == ("WEBHOOK_EXHAUSTED", "rejected")
        await retry_incident(desk.rt, desk.admin, incident.id)
        await webhooks.deliver_due(desk.rt)
        desk.rt.clock.advance(webhooks.MAX_DELAY_S)
        await webhooks.deliver_due(desk.rt)
    finally:
        receiver.close()
    [done] = await _incidents(desk, pid)
    assert done.resolution == "delivered"
    assert (await desk.process(pid)).status == "completed"
    assert (await verify(desk.rt, pid)).valid


async def test_bulk_retry_of_a_timer_incident_reruns_the_timer(desk):
    pid, timer_id = await _timer_failed(desk)
    [incident] = await _incidents(desk, pid)
    batch = await bulk.create(desk.rt, desk.admin, "retry", {}, [pid])
    progress = await bulk.process(desk.rt, batch.id)
    assert (progress.succeeded, progress.failed) == (1, 0)
    async with desk.rt.uow(readonly=True) as uow:
        [*_, last] = await uow.events.for_process(pid)
    assert last.action == "$retry"
    timer = {"schedule": timer_id, "action": "expire", "key": "t"}
    assert last.input == {"incident": incident.id, "timer": timer}
    [counted] = await _incidents(desk, pid)
    assert (counted.attempts, counted.resolved) == (2, False)  # v1 still fails
    assert (await verify(desk.rt, pid)).valid
