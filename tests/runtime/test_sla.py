"""SLA scanner: warnings at 80 %, breaches at 100 %, exactly once; notifications,
webhook deliveries, and an indexed range query (DESIGN §7)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json

import pytest
from kernel_fixtures import DESK, Desk, Receiver

from stateward.runtime import ticker
from stateward.runtime.access.registry import set_webhook
from stateward.runtime.core.commands import perform_action
from stateward.runtime.core.ops_support import kernel_repo
from stateward.runtime.insight.verify import verify
from stateward.runtime.queues.assignments import claim_assignment
from stateward.runtime.sweeps import sla, webhooks
from stateward.runtime.sweeps.notifications import list_notifications, notify


@pytest.fixture
async def desk(admin_rt, operator) -> Desk:
    return await Desk(admin_rt, operator).setup()


def _types(messages) -> list[str]:  # type: ignore[no-untyped-def]
    return [m.type for m in messages if m.type.startswith("workflow.sla")]


async def test_warning_fires_at_80_percent_and_breach_at_100_percent_once_each(desk):
    pid = await desk.ticket_in_review()
    desk.rt.clock.advance(79)
    assert (await sla.scan(desk.rt)).fired == 0
    desk.rt.clock.advance(1)
    assert (await sla.scan(desk.rt)).warnings == [pid]
    assert (await sla.scan(desk.rt)).fired == 0
    desk.rt.clock.advance(20)
    report = await sla.scan(desk.rt)
    assert (report.warnings, report.breaches) == ([], [pid])
    desk.rt.clock.advance(1000)
    assert (await sla.scan(desk.rt)).fired == 0
    assert _types(await desk.outbox(pid)) == ["workflow.sla.warning", "workflow.sla.breached"]
    assert (await desk.actions(pid))[-2:] == ["$sla", "$sla"]
    record = await desk.process(pid)
    assert record.sla_warned_at is not None and record.sla_breached_at is not None
    assert (await verify(desk.rt, pid)).valid


async def test_a_scan_after_a_long_outage_fires_the_warning_then_the_breach(desk):
    pid = await desk.ticket_in_review()
    desk.rt.clock.advance(5000)
    report = await sla.scan(desk.rt)
    assert (report.warnings, report.breaches) == ([pid], [pid])


async def test_leaving_the_state_before_its_deadline_fires_nothing(desk):
    pid = await desk.ticket_in_review()
    desk.rt.clock.advance(50)
    await perform_action(desk.rt, desk.admin, pid, "reject", {})
    desk.rt.clock.advance(500)
    assert (await sla.scan(desk.rt)).fired == 0
    assert _types(await desk.outbox(pid)) == []


async def test_sla_events_are_not_activity_for_the_staleness_sweep(desk):
    pid = await desk.ticket_in_review()
    idle_since = (await desk.process(pid)).last_event_at
    desk.rt.clock.advance(200)
    await sla.scan(desk.rt)
    assert (await desk.process(pid)).last_event_at == idle_since


async def test_concurrent_scanners_fire_every_mark_exactly_once(desk):
    pids = [await desk.ticket_in_review() for _ in range(8)]
    desk.rt.clock.advance(150)
    reports = await asyncio.gather(*(sla.scan(desk.rt) for _ in range(4)))
    assert sorted(p for r in reports for p in r.warnings) == sorted(pids)
    assert sorted(p for r in reports for p in r.breaches) == sorted(pids)
    for pid in pids:
        assert _types(await desk.outbox(pid)) == ["workflow.sla.warning", "workflow.sla.breached"]


async def test_a_breach_notifies_the_team_or_the_assignee(desk):
    team_pid = await desk.ticket_in_review()
    mine_pid = await desk.ticket_in_review()
    a = await desk.open_assignment(mine_pid)
    await claim_assignment(desk.rt, desk.analysts[0], a.id)
    desk.rt.clock.advance(101)
    await sla.scan(desk.rt)
    breach = "workflow.sla.breached"
    first = [n for n in await list_notifications(desk.rt, desk.analysts[0]) if n.kind == breach]
    assert {(n.recipient, n.process_id) for n in first} == {
        ("team:analyst", team_pid),
        (desk.analysts[0], mine_pid),
    }
    second = [n for n in await list_notifications(desk.rt, desk.analysts[1]) if n.kind == breach]
    assert [(n.recipient, n.process_id) for n in second] == [("team:analyst", team_pid)]
    assert await list_notifications(desk.rt, desk.outsider) == []
    assert first[0].kind == "workflow.sla.breached"
    assert first[0].payload["instanceId"] in (team_pid, mine_pid)
    breached = [m for m in await desk.outbox(mine_pid) if m.type == "workflow.sla.breached"]
    assert breached[0].team == "analyst"
    assert breached[0].payload["details"]["assignee"] == desk.analysts[0]


async def test_a_breach_is_posted_to_the_namespace_webhook_with_an_hmac_signature(desk):
    receiver = Receiver(statuses=[500])
    try:
        await set_webhook(desk.rt, desk.operator, DESK, receiver.url, "s3cret")
        pid = await desk.ticket_in_review()
        desk.rt.clock.advance(101)
        report = await ticker.tick(desk.rt)
        assert report.sla.breaches == [pid]
        assert [a.status_code for a in report.deliveries] == [500]
        [queued] = await webhooks.list_deliveries(desk.rt, DESK)
        assert (queued.status, queued.attempts, queued.last_error) == ("pending", 1, "HTTP 500")
        assert (await ticker.tick(desk.rt)).deliveries == []  # backing off
        desk.rt.clock.advance(webhooks.backoff_seconds(1))
        assert [a.ok for a in (await ticker.tick(desk.rt)).deliveries] == [True]
        [done] = await webhooks.list_deliveries(desk.rt, DESK)
        assert (done.status, done.attempts) == ("delivered", 2)
    finally:
        receiver.close()
    assert len(receiver.requests) == 2
    headers, body = receiver.requests[-1]
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["x-stateward-signature"] == f"sha256={expected}"
    payload = json.loads(body)
    assert (payload["type"], payload["instanceId"], payload["team"]) == (
        "workflow.sla.breached",
        pid,
        "analyst",
    )


async def test_a_delivery_gives_up_after_the_last_attempt(desk):
    receiver = Receiver(statuses=[500] * 20)
    try:
        await set_webhook(desk.rt, desk.operator, DESK, receiver.url, "k")
        await desk.ticket_in_review()
        desk.rt.clock.advance(101)
        await sla.scan(desk.rt)
        for _ in range(webhooks.MAX_ATTEMPTS + 2):
            await webhooks.deliver_due(desk.rt)
            desk.rt.clock.advance(webhooks.MAX_DELAY_S)
    finally:
        receiver.close()
    [failed] = await webhooks.list_deliveries(desk.rt)
    assert (failed.status, failed.attempts) == ("failed", webhooks.MAX_ATTEMPTS)
    assert len(receiver.requests) == webhooks.MAX_ATTEMPTS


async def test_the_scan_is_a_range_query_on_the_pending_index(desk, db_kind):
    async with desk.rt.uow(readonly=True) as uow:
        repo = kernel_repo(uow)
        conn = await uow.session.connection()
        for kind, index in (
            ("warning", "ix_processes_sla_warn_pending"),
            ("breach", "ix_processes_sla_due_pending"),
        ):
            sql = str(repo.due_sla_statement(kind, "CURRENT_TIMESTAMP", 100))
            if db_kind == "sqlite":
                rows = await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")
            else:
                await conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
                rows = await conn.exec_driver_sql(f"EXPLAIN {sql}")
            plan = " ".join(str(r[-1]) for r in rows)
            assert index in plan, plan
            assert "SCAN processes" not in plan and "Seq Scan" not in plan, plan


async def test_a_notification_of_a_kind_the_api_cannot_name_is_refused_before_it_is_stored(desk):
    """A stored unknown kind would break every later read of the recipient's list."""
    async with desk.rt.uow() as uow:
        with pytest.raises(ValueError, match=r"unknown notification kind 'workflow\.sla\.late'"):
            await notify(uow, desk.analysts[0], "ops", "workflow.sla.late", {}, desk.rt.clock.now())
        await uow.commit()
    assert await list_notifications(desk.rt, desk.analysts[0]) == []


async def test_a_transient_fault_in_a_webhook_sweep_is_retried_not_raised(desk, monkeypatch):
    """A connection lost in the claim or in the outcomes' transaction (PostgreSQL's idle
    bound ending it on a descheduled node; seen in CI) runs that transaction again: the
    delivery is sent once and recorded delivered."""
    from stateward.persistence.uow import UnitOfWork

    receiver = Receiver(statuses=[200])
    try:
        await set_webhook(desk.rt, desk.operator, DESK, receiver.url, "k")
        await desk.ticket_in_review()
        desk.rt.clock.advance(101)
        await sla.scan(desk.rt)
        real = UnitOfWork.commit
        faults: list[int] = []

        async def lost(self) -> None:  # type: ignore[no-untyped-def]
            if not self.readonly and len(faults) < 2:  # the claim's, then the outcomes'
                faults.append(1)
                raise ConnectionError("connection was closed in the middle of operation")
            await real(self)

        monkeypatch.setattr(UnitOfWork, "commit", lost)
        attempts = await webhooks.deliver_due(desk.rt)
        monkeypatch.setattr(UnitOfWork, "commit", real)
    finally:
        receiver.close()
    assert faults == [1, 1] and [a.ok for a in attempts] == [True]
    [done] = await webhooks.list_deliveries(desk.rt, DESK)
    assert (done.status, done.attempts) == ("delivered", 1)
    assert len(receiver.requests) == 1
