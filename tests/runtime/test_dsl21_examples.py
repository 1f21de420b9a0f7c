"""The three DSL 2.1 examples of `examples/`, loaded the way `serve --demo` loads them and
run end to end through the real runtime (SQLite and PostgreSQL), every log verified:
purchase approval (routing, revise loop, four eyes, payment spawn, idle auto-cancel),
public service request (classifier, a returning visitor, unanswered -> cancelled) and
onboarding (parallel team tasks joined once)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from stateward.domain.errors import DomainError
from stateward.governance.keys import KeyPair, generate_keypair
from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.demo import load_demo
from stateward.runtime.hooks import automation
from stateward.runtime.hooks.runner import HookRunner
from stateward.runtime.insight.verify import verify
from stateward.runtime.public.entry import advance_public, public_view, start_public
from stateward.runtime.sweeps import scheduler

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PURCHASE = "procure/purchasing/purchase-approval"
PAYMENT = "finance/payments/payment"
INTAKE = "intake/public/service-request"
ONBOARDING = "people/onboarding/onboarding"
IP = "198.51.100.9"


class People:
    """Keys with the roles the examples' teams need."""

    def __init__(self, rt: Runtime, operator: KeyPair) -> None:
        self.rt, self.operator = rt, operator
        self.keys: dict[str, str] = {}

    async def grant(self, name: str, namespace: str, *roles: str) -> str:
        key = self.keys.setdefault(name, generate_keypair().public)
        await registry.grant_role(self.rt, self.operator, namespace, key, list(roles))
        return key


@pytest.fixture
async def people(admin_rt, operator) -> AsyncIterator[People]:
    async with HookRunner(workers=1) as runner:
        automation.install(admin_rt, runner)  # the classifier hook runs like on a node
        await load_demo(admin_rt, operator, EXAMPLES)
        yield People(admin_rt, operator)


async def _record(rt: Runtime, pid: str) -> Any:
    async with rt.uow(readonly=True) as uow:
        return await uow.processes.get(pid)


async def _verified(rt: Runtime, *pids: str) -> None:
    for pid in pids:
        assert (await verify(rt, pid)).valid, pid


def _fields(**values: Any) -> dict[str, Any]:
    return {"fields": values}


async def test_purchase_approval_revise_loop_four_eyes_and_payment(people):
    rt = people.rt
    ns = "procure/purchasing"
    alice = await people.grant("alice", ns, "requester")
    bob = await people.grant("bob", ns, "approver", "requester")
    mia = await people.grant("mia", ns, "manager")
    fin = await people.grant("fin", "finance/payments", "finance")
    pid = (await start_instance(rt, alice, PURCHASE, {})).record.id
    await perform_action(rt, alice, pid, "submit", _fields(item="Laptop", amount=900))
    assert (await _record(rt, pid)).state == "approval"
    await perform_action(rt, bob, pid, "send_back", {"comment": "add the model"})
    revise = await _record(rt, pid)
    assert (revise.state, revise.data["comments"]) == ("revise", ["add the model"])
    with pytest.raises(DomainError) as not_hers:  # the revision is on alice's worklist
        await perform_action(rt, bob, pid, "submit", _fields(item="Laptop X1", amount=12000))
    assert not_hers.value.code == "FORBIDDEN"
    await perform_action(rt, alice, pid, "submit", _fields(item="Laptop X1", amount=12000))
    assert (await _record(rt, pid)).state == "manager_approval"  # the amount routes it
    done = await perform_action(rt, mia, pid, "approve", {})
    (payment,) = done.children
    assert (payment.workflow, payment.data["amount"], payment.data["approved_by"]) == (
        PAYMENT,
        12000,
        mia,
    )
    with pytest.raises(DomainError) as direct:
        await start_instance(rt, fin, PAYMENT, {})
    assert direct.value.code == "FORBIDDEN"
    await perform_action(rt, fin, payment.id, "pay", {"payment_ref": "PAY-1"})
    assert (await _record(rt, payment.id)).status == "completed"
    four_eyes = (await start_instance(rt, bob, PURCHASE, {})).record.id
    await perform_action(rt, bob, four_eyes, "submit", _fields(item="Chair", amount=80))
    with pytest.raises(DomainError) as own:
        await perform_action(rt, bob, four_eyes, "approve", {})
    assert own.value.code == "GUARD_FAILED"
    await _verified(rt, pid, payment.id, four_eyes)


async def test_an_idle_purchase_draft_is_auto_cancelled_not_completed(people):
    rt = people.rt
    alice = await people.grant("alice", "procure/purchasing", "requester")
    pid = (await start_instance(rt, alice, PURCHASE, {})).record.id
    rt.clock.advance(14 * 86400 + 1)  # type: ignore[attr-defined]
    assert len((await scheduler.fire_due(rt)).fired) >= 1
    record = await _record(rt, pid)
    assert (record.status, record.state) == ("cancelled", "draft")
    await _verified(rt, pid)


async def test_service_request_classifier_returning_visitor_and_expiry(people):
    rt = people.rt
    agent = await people.grant("agent", "intake/public", "agent")
    entry = await start_public(rt, INTAKE, {}, IP)
    view = await advance_public(
        rt, entry.token, "send", _fields(name="Ann", email="ann@example.com",
                                         description="It is broken."), IP,
    )  # fmt: skip
    assert view.state.key == "more_info" and "question" in view.data
    later = await public_view(rt, entry.token, IP)  # the visitor comes back with the link
    assert (later.state.key, later.active) == ("more_info", True)
    back = await advance_public(
        rt, entry.token, "answer", _fields(details="The printer on floor 2 jams daily."), IP
    )
    # In the team's queue the visitor's view is frozen at its last public step (issue 13).
    assert (back.state.key, back.status) == ("more_info", "processing")
    pid = await _pid_of(rt, entry.token)
    assert (await _record(rt, pid)).state == "queue"
    await perform_action(rt, agent, pid, "resolve", {"resolution": "Replaced the printer"})
    assert (await _record(rt, pid)).status == "completed"

    angry = await start_public(rt, INTAKE, {}, IP)
    routed = await advance_public(
        rt, angry.token, "send", _fields(name="Bo", email="bo@example.com",
                                         description="This is unacceptable, I want a refund now!"),
        IP,
    )  # fmt: skip
    assert routed.status == "processing" and routed.state.key != "complaints"
    assert (await _record(rt, await _pid_of(rt, angry.token))).state == "complaints"

    silent = await start_public(rt, INTAKE, {}, IP)
    await advance_public(
        rt, silent.token, "send", _fields(name="Cy", email="cy@example.com",
                                          description="Help please."), IP,
    )  # fmt: skip
    rt.clock.advance(7 * 86400 + 1)  # type: ignore[attr-defined]
    await scheduler.fire_due(rt)
    gone = await public_view(rt, silent.token, IP)
    assert (gone.status, gone.active) == ("cancelled", False)
    await _verified(rt, pid, await _pid_of(rt, angry.token), await _pid_of(rt, silent.token))


async def _pid_of(rt: Runtime, token: str) -> str:
    import hashlib

    async with rt.uow(readonly=True) as uow:
        record = await uow.processes.by_entry_token(hashlib.sha256(token.encode()).hexdigest())
    assert record is not None
    return str(record.id)


async def test_onboarding_teams_work_in_parallel_and_the_join_fires_once(people):
    rt = people.rt
    hr = await people.grant("hr", "people/onboarding", "hr")
    teams = ["hr", "it", "facilities"]
    workers = [await people.grant(t, "people/onboarding", "onboarding") for t in teams]
    pid = (await start_instance(rt, hr, ONBOARDING, {"teams": teams})).record.id
    begun = await perform_action(
        rt, hr, pid, "begin", _fields(employee="Eve", start_date="2027-01-04")
    )
    tasks = [c.id for c in begun.children]
    assert [c.data["item"] for c in begun.children] == teams
    await asyncio.gather(
        *(
            perform_action(rt, w, t, "complete", {"note": f"{team} ready"})
            for w, t, team in zip(workers, tasks, teams, strict=True)
        )
    )
    parent = await _record(rt, pid)
    assert (parent.state, parent.status) == ("ready", "completed")
    results = {r["result"]["item"]: r["result"] for r in parent.data["team_results"]}
    assert results["it"] == {"item": "it", "note": "it ready", "start_date": "2027-01-04"}
    async with rt.uow(readonly=True) as uow:
        actions = [e.action for e in await uow.events.for_process(pid)]
    assert actions.count("$child") == 3 and actions[-1] == "$child"
    await _verified(rt, pid, *tasks)


async def test_an_invoice_is_settled_by_the_banks_correlated_message(people):
    from stateward.runtime.messages.correlate import publish

    rt = people.rt
    ns = "finance/payments"
    fin = await people.grant("fin", ns, "finance")
    bank = await people.grant("bank", ns, "operator")  # the integration that publishes
    pid = (await start_instance(rt, fin, "finance/payments/invoice", {})).record.id
    await perform_action(rt, fin, pid, "issue", _fields(invoice_no="INV-7", amount=120))
    other = await publish(rt, bank, ns, "bank.payment-received", "INV-8", {"amount": 1})
    assert other.delivered == []  # another invoice's payment settles nothing here
    paid = {"amount": 120, "reference": "BANK-42"}
    done = await publish(rt, bank, ns, "bank.payment-received", "INV-7", paid, message_id="m1")
    assert done.delivered == [pid]
    record = await _record(rt, pid)
    assert (record.state, record.data["paid_amount"], record.data["bank_ref"]) == (
        "settled",
        120,
        "BANK-42",
    )
    again = await publish(rt, bank, ns, "bank.payment-received", "INV-7", paid, message_id="m1")
    assert again.duplicate and again.delivered == [pid]
    await _verified(rt, pid)
