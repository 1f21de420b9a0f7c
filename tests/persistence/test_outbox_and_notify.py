"""Outbox cursors, notifications and webhook deliveries."""

from __future__ import annotations

import asyncio
import random

from persistence_factories import T0, at, new_process

from stateward.persistence import UnitOfWorkFactory
from stateward.persistence.notify import team_recipient
from stateward.records import OutboxFilter


async def test_outbox_ids_are_monotonic_and_carry_the_payload(
    uow_factory: UnitOfWorkFactory,
) -> None:
    async with uow_factory() as uow:
        staged_first = uow.outbox.stage(
            "workflow.started",
            {"at": "2026-11-30T02:21:09.123Z", "instanceId": "i-1", "details": {}},
            T0,
            namespace="customer/retail",
            workflow="customer/retail/onboarding",
            instance_id="i-1",
        )
        staged_second = uow.outbox.stage("workflow.assigned", {}, T0, team="analyst")
        await uow.commit()
    first, second = staged_first.sequenced(), staged_second.sequenced()
    assert first.id < second.id
    assert first.message() == {
        "id": first.id,
        "type": "workflow.started",
        "at": "2026-11-30T02:21:09.123Z",
        "instanceId": "i-1",
        "details": {},
    }
    async with uow_factory() as uow:
        assert [r.id for r in await uow.outbox.unpublished()] == [first.id, second.id]
        assert await uow.outbox.mark_published([first.id], at(1)) == 1
        assert await uow.outbox.mark_published([first.id], at(2)) == 0
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        assert [r.id for r in await uow.outbox.unpublished()] == [second.id]
        assert await uow.outbox.last_id() == second.id
        everything = await uow.outbox.events_after(0)
        assert everything[0].published_at == at(1)
        by_team = await uow.outbox.events_after(0, OutboxFilter(team="analyst"))
        assert [r.id for r in by_team] == [second.id]
        by_type = await uow.outbox.events_after(0, OutboxFilter(types=("workflow.started",)))
        assert [r.id for r in by_type] == [first.id]
        assert await uow.outbox.events_after(second.id) == []


async def test_a_cursor_reader_never_skips_rows_committed_concurrently(
    uow_factory: UnitOfWorkFactory,
) -> None:
    rng = random.Random(7)
    done = asyncio.Event()

    async def writer(n: int) -> list[int]:
        ids = []
        for _ in range(5):
            async with uow_factory() as uow:
                row = uow.outbox.stage("workflow.updated", {"n": n}, T0)
                await asyncio.sleep(rng.random() / 500)  # commit late, sometimes
                await uow.commit()
            ids.append(row.sequenced().id)
        return ids

    async def reader() -> list[int]:
        seen: list[int] = []
        cursor = 0
        while True:
            finished = done.is_set()
            async with uow_factory(readonly=True) as uow:
                rows = await uow.outbox.events_after(cursor)
            seen.extend(r.id for r in rows)
            cursor = rows[-1].id if rows else cursor
            if finished and not rows:
                return seen
            await asyncio.sleep(0)

    reading = asyncio.create_task(reader())
    written = await asyncio.gather(*(writer(n) for n in range(8)))
    done.set()
    seen = await reading
    expected = sorted(i for ids in written for i in ids)
    assert seen == expected


async def test_notifications_are_listed_per_recipient_and_marked_read(
    uow_factory: UnitOfWorkFactory,
) -> None:
    process = new_process()
    async with uow_factory() as uow:
        await uow.processes.add(process)
        mine = await uow.notifications.add(
            "k1", "customer/retail", "sla.breached", {"state": "review"}, T0, process_id=process.id
        )
        team = await uow.notifications.add(
            team_recipient("analyst"), "customer/retail", "sla.breached", {}, at(1)
        )
        await uow.notifications.add("k2", "customer/retail", "sla.breached", {}, at(2))
        await uow.commit()
    recipients = ["k1", "team:analyst"]
    async with uow_factory() as uow:
        listed = await uow.notifications.for_recipients(recipients)
        assert [n.id for n in listed] == [team.id, mine.id]
        assert listed[1].payload == {"state": "review"} and listed[1].process_id == process.id
        assert await uow.notifications.mark_read([mine.id, team.id + 1], recipients, at(3)) == 1
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        unread = await uow.notifications.for_recipients(recipients, unread_only=True)
        assert [n.id for n in unread] == [team.id]
        older = await uow.notifications.for_recipients(recipients, before_id=team.id)
        assert [n.id for n in older] == [mine.id]


async def test_webhook_deliveries_are_leased_once_and_retried(
    uow_factory: UnitOfWorkFactory,
) -> None:
    async with uow_factory() as uow:
        await uow.webhooks.set("ns/a", "https://hooks.example/a", "s3cret", T0)
        await uow.webhooks.set("ns/a", "https://hooks.example/b", "s3cret", at(1))
        hook = await uow.webhooks.get("ns/a")
        assert hook is not None and hook.url == "https://hooks.example/b"
        delivery = await uow.webhooks.enqueue("ns/a", hook.url, "workflow.sla.breached", "{}", T0)
        await uow.commit()
    async with uow_factory() as uow:
        (leased,) = await uow.webhooks.claim_due_deliveries(at(1), 10, lease_until=at(31))
        assert await uow.webhooks.claim_due_deliveries(at(2), 10, lease_until=at(32)) == []
        await uow.webhooks.mark_failed(leased.id, "HTTP 500", retry_at=at(10))
        await uow.commit()
    assert (leased.id, leased.attempts) == (delivery.id, 1)
    async with uow_factory() as uow:
        (again,) = await uow.webhooks.claim_due_deliveries(at(10), 10, lease_until=at(40))
        await uow.webhooks.mark_delivered(again.id, at(11))
        await uow.webhooks.set("ns/a", None, None, at(12))
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        final = await uow.webhooks.delivery(delivery.id)
        assert final is not None
        assert (final.status, final.attempts, final.last_error) == ("delivered", 2, "HTTP 500")
        assert await uow.webhooks.get("ns/a") is None
