"""Many writers on one instance: contiguous seqs, no lost update, replay agrees."""

from __future__ import annotations

import asyncio

from runtime_definitions import ONBOARDING, REVIEW, allow_onboarding_spawns

from stateward.domain.errors import DomainError
from stateward.governance.keys import generate_keypair
from stateward.runtime.access import registry
from stateward.runtime.core.act import act
from stateward.runtime.core.commands import perform_action, sign_as, start_instance
from stateward.runtime.insight.verify import verify

N = 50


async def test_fifty_concurrent_actions_are_each_applied_exactly_once(admin_rt, operator):
    await registry.deploy_workflow(admin_rt, operator, REVIEW)
    await allow_onboarding_spawns(admin_rt, operator)
    await registry.deploy_workflow(admin_rt, operator, ONBOARDING)
    pid = (await start_instance(admin_rt, operator.public, ONBOARDING["$path"])).record.id
    await perform_action(admin_rt, operator.public, pid, "create", {"name": "Ann"})
    writer = generate_keypair()  # client-signed envelopes need no role for `note`...
    namespace = ONBOARDING["$path"].rsplit("/", 1)[0]  # ...but a role to read the instance
    await registry.grant_role(admin_rt, operator, namespace, writer.public, ["viewer"])

    async def attested(i: int) -> object:
        return await perform_action(admin_rt, operator.public, pid, "note", {"i": i})

    async def client(i: int) -> object:
        return await act(
            admin_rt,
            sign_as(admin_rt, writer, pid, "note", ONBOARDING["$path"], {"i": i}),
            attested=False,
        )

    calls = [attested(i) if i % 2 else client(i) for i in range(N)]
    results = await asyncio.gather(*calls, return_exceptions=True)
    accepted = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(r, DomainError) and r.code == "CONFLICT" for r in refused), refused
    assert len(accepted) >= N // 2  # every attested call wins eventually

    async with admin_rt.uow(readonly=True) as uow:
        events = await uow.events.for_process(pid)
        record = await uow.processes.get(pid)
    assert record is not None
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    notes = [e for e in events if e.action == "note"]
    assert len(notes) == len(accepted)
    assert sorted(e.input["i"] for e in notes) == sorted(
        r.event.input["i"]
        for r in accepted  # type: ignore[attr-defined]
    )
    assert record.data["notes"] == len(accepted)
    assert record.seq == len(events)
    report = await verify(admin_rt, pid)
    assert report.valid, [p.line() for p in report.problems]
