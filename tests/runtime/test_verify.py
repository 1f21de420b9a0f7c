"""`verify`: signatures, hash chains and a replay of every log, with process + seq."""

from __future__ import annotations

import json

from runtime_definitions import ONBOARDING, REVIEW, allow_onboarding_spawns
from sqlalchemy import text

from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.insight.verify import verify


async def _history(rt, operator) -> str:  # type: ignore[no-untyped-def]
    await registry.deploy_workflow(rt, operator, REVIEW)
    await allow_onboarding_spawns(rt, operator)
    await registry.deploy_workflow(rt, operator, ONBOARDING)
    await registry.grant_role(rt, operator, "customer", operator.public, ["manager"])
    pid = (await start_instance(rt, operator.public, ONBOARDING["$path"], {"n": 1})).record.id
    await perform_action(rt, operator.public, pid, "create", {"name": "Ann"})
    await perform_action(rt, operator.public, pid, "note", {})
    await perform_action(rt, operator.public, pid, "approve", {})
    return pid


async def test_an_untouched_deployment_verifies(admin_rt, operator):
    await _history(admin_rt, operator)
    report = await verify(admin_rt)
    assert report.valid, [p.line() for p in report.problems]
    # system (genesis + trust_node), case (allow_spawn + deploy), customer x2, instance, child
    assert report.events_checked == 2 + 2 + 2 + 4 + 1


async def test_an_edited_event_input_is_reported_with_process_and_seq(admin_rt, operator):
    pid = await _history(admin_rt, operator)
    async with admin_rt.uow() as uow:
        await uow.session.execute(
            text("UPDATE events SET input = :v WHERE process_id = :p AND seq = 2"),
            {"v": json.dumps({"name": "Mallory"}), "p": pid},
        )
        await uow.commit()
    report = await verify(admin_rt, pid)
    assert not report.valid
    assert {(p.process, p.seq) for p in report.problems} == {(pid, 2)}


async def test_an_edited_envelope_breaks_signature_chain_and_replay(admin_rt, operator):
    pid = await _history(admin_rt, operator)
    async with admin_rt.uow() as uow:
        stored = await uow.events.get(pid, 2)
        assert stored is not None
        forged = stored.envelope.replace('"Ann"', '"Eve"')
        await uow.session.execute(
            text("UPDATE events SET envelope = :v WHERE process_id = :p AND seq = 2"),
            {"v": forged, "p": pid},
        )
        await uow.commit()
    report = await verify(admin_rt)
    codes = {(p.process, p.seq, p.code) for p in report.problems}
    assert (pid, 2, "HASH_MISMATCH") in codes
    assert (pid, 2, "BAD_SIGNATURE") in codes
    assert (pid, 4, "DATA_MISMATCH") in codes


async def test_edited_process_data_is_a_replay_divergence(admin_rt, operator):
    pid = await _history(admin_rt, operator)
    async with admin_rt.uow() as uow:
        record = await uow.processes.get(pid)
        assert record is not None
        data = dict(record.data, name="Eve")
        await uow.session.execute(
            text("UPDATE process_data SET data = :d WHERE process_id = :p"),
            {"d": json.dumps(data), "p": pid},
        )
        await uow.commit()
    report = await verify(admin_rt)
    assert [(p.process, p.seq, p.code) for p in report.problems] == [(pid, 4, "DATA_MISMATCH")]


async def test_a_grant_written_outside_the_log_is_reported(admin_rt, operator):
    await _history(admin_rt, operator)
    async with admin_rt.uow() as uow:
        await uow.grants.grant("customer", "intruder", "admin", admin_rt.clock.now())
        await uow.commit()
    report = await verify(admin_rt)
    assert [(p.process, p.code) for p in report.problems] == [
        ("customer-registry", "GRANTS_MISMATCH")
    ]


async def test_verifying_an_unknown_process_is_a_finding(admin_rt):
    report = await verify(admin_rt, "nope")
    assert [(p.process, p.code) for p in report.problems] == [("nope", "NOT_FOUND")]
