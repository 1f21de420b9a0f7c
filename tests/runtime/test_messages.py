"""Message correlation (issue 15): publish delivers to the waiting instances through an
index, kept messages reach instances that arrive later exactly once, `messageId` makes
publishing idempotent, a message may start a workflow, and every delivery replays."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kernel_fixtures import DESK, Desk

from stateward.domain.errors import DomainError
from stateward.runtime.access import registry
from stateward.runtime.core.commands import cancel_instance, perform_action, start_instance
from stateward.runtime.insight.verify import verify
from stateward.runtime.messages import correlate

ORDER: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{DESK}/order",
    "initial": "draft",
    "correlation": {"paid": "data.order.id", "shipped": "data.order.id"},
    "states": {
        "draft": {"label": "Draft"},
        "awaiting_payment": {"label": "Awaiting payment"},
        "paid": {"label": "Paid"},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "submit": {"from": "draft", "to": "awaiting_payment"},
        "payment": {
            "from": "awaiting_payment", "to": "paid", "message": "paid", "role": "finance",
            "mutate": {"$set": {"amount": {"$ref": "input.amount"}}},
        },
        "ship": {"from": "paid", "to": "done", "message": "shipped"},
    },
}  # fmt: skip
STARTED: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{DESK}/inbound",
    "initial": "received",
    "start": {"message": "lead"},
    "states": {"received": {"label": "Received"}, "closed": {"label": "Closed", "terminal": True}},
    "actions": {"close": {"from": "received", "to": "closed"}},
}


@pytest.fixture
async def desk(admin_rt, operator) -> Desk:
    return await Desk(admin_rt, operator).setup(ORDER, STARTED)


async def _order(desk: Desk, order_id: Any, *, submit: bool = True) -> str:
    pid = (
        await start_instance(desk.rt, desk.admin, ORDER["$path"], {"order": {"id": order_id}})
    ).record.id
    if submit:
        await perform_action(desk.rt, desk.admin, pid, "submit", {})
    return pid


async def _publish(desk: Desk, key: str, **kw: Any) -> correlate.Publication:
    payload = kw.pop("payload", {"amount": 12})
    return await correlate.publish(desk.rt, desk.admin, DESK, "paid", key, payload, **kw)


async def test_publish_performs_the_action_on_the_waiting_instance_only(desk):
    waiting = await _order(desk, "A-1")
    other = await _order(desk, "A-2")
    drafting = await _order(desk, "A-1", submit=False)  # same key, not waiting yet
    result = await _publish(desk, "A-1")
    assert result.delivered == [waiting] and not result.duplicate
    record = await desk.process(waiting)
    assert (record.state, record.data["amount"]) == ("paid", 12)
    assert (await desk.process(other)).state == "awaiting_payment"
    assert (await desk.process(drafting)).state == "draft"
    async with desk.rt.uow(readonly=True) as uow:
        last = (await uow.events.for_process(waiting))[-1]
        assert await uow.messages.waits_of(waiting) == [("shipped", "A-1", "ship")]
    assert (last.action, last.actor, last.signer) == ("$message", "system", desk.rt.node_public)
    assert last.input["name"] == "paid" and last.input["input"] == {"amount": 12}
    assert (await verify(desk.rt, waiting)).valid


async def test_a_number_key_correlates_as_its_text(desk):
    pid = await _order(desk, 42)
    assert (await _publish(desk, "42")).delivered == [pid]


async def test_a_kept_message_is_delivered_once_when_an_instance_arrives(desk):
    result = await _publish(desk, "B-1", ttl_seconds=3600)
    assert result.delivered == []
    pid = await _order(desk, "B-1")  # enters awaiting_payment: a pending delivery
    assert await correlate.deliver_pending(desk.rt) != []
    assert (await desk.process(pid)).state == "paid"
    assert await correlate.deliver_pending(desk.rt) == []
    assert (await desk.actions(pid)).count("$message") == 1
    second = await _order(desk, "B-1")  # another instance gets it too, once
    await correlate.deliver_pending(desk.rt)
    assert (await desk.process(second)).state == "paid"
    assert (await verify(desk.rt, pid)).valid


async def test_an_expired_message_is_not_delivered(desk, clock):
    await _publish(desk, "C-1", ttl_seconds=60)
    clock.advance(61)
    pid = await _order(desk, "C-1")
    assert await correlate.deliver_pending(desk.rt) == []
    assert (await desk.process(pid)).state == "awaiting_payment"


async def test_a_message_id_makes_publishing_idempotent(desk):
    pid = await _order(desk, "D-1")
    first = await _publish(desk, "D-1", message_id="m-1", ttl_seconds=600)
    again = await _publish(desk, "D-1", message_id="m-1", ttl_seconds=600)
    assert again.duplicate and again.message.id == first.message.id
    assert first.delivered == again.delivered == [pid]
    assert (await desk.actions(pid)).count("$message") == 1
    with pytest.raises(DomainError) as err:
        await _publish(desk, "D-1", message_id="m-1", payload={"amount": 13})
    assert err.value.code == "REPLAYED"


async def test_concurrent_publishes_of_one_message_deliver_once(desk):
    pid = await _order(desk, "E-1")
    results = await asyncio.gather(
        *(_publish(desk, "E-1", message_id="m-e") for _ in range(4)), return_exceptions=True
    )
    assert all(not isinstance(r, BaseException) for r in results), results
    assert (await desk.actions(pid)).count("$message") == 1


async def test_a_message_starts_a_workflow_that_declares_it(desk):
    result = await correlate.publish(
        desk.rt, desk.admin, DESK, "lead", "any", {"from": "web"}, message_id="lead-1"
    )
    assert len(result.started) == 1
    record = await desk.process(result.started[0])
    assert (record.workflow, record.data["from"]) == (STARTED["$path"], "web")
    again = await correlate.publish(
        desk.rt, desk.admin, DESK, "lead", "any", {"from": "web"}, message_id="lead-1"
    )
    assert again.started == result.started  # the same instance, not a second one


async def test_a_delivery_whose_instance_moved_on_is_recorded_not_applicable(desk):
    await _publish(desk, "F-1", ttl_seconds=600)
    pid = await _order(desk, "F-1")
    async with desk.rt.uow() as uow:  # it moved on before the delivery ran
        pending = await uow.messages.pending(10)
    await cancel_instance(desk.rt, desk.admin, pid, "changed their mind")
    assert await correlate.deliver(desk.rt, [d.id for d in pending]) == []
    async with desk.rt.uow(readonly=True) as uow:
        closed = await uow.messages.delivery(pending[0].id)
    assert closed is not None and closed.status == "not_applicable"
    assert closed.detail is not None and closed.detail.startswith("INACTIVE_PROCESS")


async def test_publishing_needs_admin_or_operator_in_the_namespace(desk):
    await _order(desk, "G-1")
    with pytest.raises(DomainError) as err:
        await correlate.publish(desk.rt, desk.outsider, DESK, "paid", "G-1")
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(DomainError) as err:
        await correlate.publish(desk.rt, desk.member, DESK, "paid", "G-1")
    assert err.value.code == "FORBIDDEN"
    await registry.grant_role(desk.rt, desk.operator, DESK, desk.member, ["operator"])
    assert len((await correlate.publish(desk.rt, desk.member, DESK, "paid", "G-1")).delivered) == 1


@pytest.mark.parametrize(
    ("kw", "pointer"),
    [
        ({"name": "bad name"}, "/name"),
        ({"key": ""}, "/correlationKey"),
        ({"payload": [1]}, "/payload"),
        ({"ttl_seconds": -1}, "/ttlSeconds"),
        ({"message_id": ""}, "/messageId"),
        ({"namespace": "../x"}, "/namespace"),
    ],
)
async def test_bad_publish_input_is_refused_with_a_pointer(desk, kw, pointer):
    args = {"namespace": DESK, "name": "paid", "key": "k", "payload": {}} | kw
    with pytest.raises(DomainError) as err:
        await correlate.publish(
            desk.rt, desk.admin, args["namespace"], args["name"], args["key"], args["payload"],
            ttl_seconds=kw.get("ttl_seconds", 0), message_id=kw.get("message_id"),
        )  # fmt: skip
    assert (err.value.code, err.value.pointer) == ("INVALID_INPUT", pointer)


async def test_the_waits_index_follows_the_instance(desk):
    pid = await _order(desk, "H-1", submit=False)
    async with desk.rt.uow(readonly=True) as uow:
        assert await uow.messages.waits_of(pid) == []
    await perform_action(desk.rt, desk.admin, pid, "submit", {})
    async with desk.rt.uow(readonly=True) as uow:
        assert await uow.messages.waits_of(pid) == [("paid", "H-1", "payment")]
    await _publish(desk, "H-1")
    await correlate.publish(desk.rt, desk.admin, DESK, "shipped", "H-1")
    async with desk.rt.uow(readonly=True) as uow:
        assert await uow.messages.waits_of(pid) == []  # completed: waits for nothing


async def test_another_node_publishing_finds_the_waiting_instance(desk, db_url, clock):
    """The index is in the database: a node that never saw the instance delivers to it."""
    from stateward.governance.keys import generate_keypair
    from stateward.runtime.core.services import Runtime
    from stateward.settings import Settings

    pid = await _order(desk, "N-1")
    other = await Runtime.open(Settings(database_url=db_url), clock=clock,
                               node_key=generate_keypair())  # fmt: skip
    try:
        result = await correlate.publish(other, desk.admin, DESK, "paid", "N-1", {"amount": 1},
                                         ttl_seconds=60)  # fmt: skip
        assert result.delivered == [pid]
        async with desk.rt.uow(readonly=True) as uow:
            last = (await uow.events.for_process(pid))[-1]
        assert (last.action, last.signer) == ("$message", other.node_public)
        late = await _order(desk, "N-1")  # arrives on the first node: the kept message
        assert await correlate.deliver_pending(other) != []
        assert (await desk.process(late)).state == "paid"
    finally:
        await other.close()


async def test_a_transient_fault_while_publishing_is_retried(desk, monkeypatch):
    """A dropped connection in the publishing transaction (e.g. PostgreSQL's idle bound
    ending it while the node was descheduled) is retried, not answered UNAVAILABLE; the
    message is stored once and delivered once."""
    from stateward.persistence.messages import MessageRepository

    waiting = await _order(desk, "T-1")
    real = MessageRepository.add_deliveries
    faults: list[int] = []

    async def flaky(self, *args: Any, **kw: Any) -> Any:  # type: ignore[no-untyped-def]
        if not faults:
            faults.append(1)
            raise ConnectionError("connection was closed in the middle of operation")
        return await real(self, *args, **kw)

    monkeypatch.setattr(MessageRepository, "add_deliveries", flaky)
    result = await _publish(desk, "T-1")
    assert faults == [1] and result.delivered == [waiting] and not result.duplicate
    async with desk.rt.uow(readonly=True) as uow:
        assert len(await uow.messages.deliveries_of(result.message.id)) == 1


async def test_a_publish_whose_commit_landed_before_the_fault_is_not_a_duplicate(desk, monkeypatch):
    """The first attempt committed, then its connection was lost: the retry finds the
    message this call published (its generated id) and answers it as new, once."""
    from stateward.persistence.uow import UnitOfWork

    waiting = await _order(desk, "T-2")
    real = UnitOfWork.commit
    faults: list[int] = []

    async def lost_after(self) -> None:  # type: ignore[no-untyped-def]
        await real(self)
        if not faults and not self.readonly:
            faults.append(1)
            raise ConnectionError("connection was closed after COMMIT")

    monkeypatch.setattr(UnitOfWork, "commit", lost_after)
    result = await _publish(desk, "T-2")
    assert faults == [1] and not result.duplicate and result.delivered == [waiting]
