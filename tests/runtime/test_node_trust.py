"""Node trust is governed by signed `trust_node` / `distrust_node` events of the system
registry (admin only): `verify` (database and offline `--log`) accepts a server-attested
event only from a node key the log trusted at that point."""

from __future__ import annotations

import json

import pytest
from kernel_fixtures import TICKET, Desk

from stateward.domain.errors import FORBIDDEN, DomainError
from stateward.domain.model import SYSTEM_ACTOR
from stateward.governance.keys import generate_keypair
from stateward.runtime.access import registry
from stateward.runtime.access.genesis import init
from stateward.runtime.core.commands import sign_as, start_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.logfile import export_lines, parse_lines
from stateward.runtime.insight.logverify import verify_database, verify_log
from stateward.settings import Settings


async def _offline(rt: Runtime):
    lines = [json.dumps(x) async for x in export_lines(rt)]
    return verify_log(parse_lines(lines), workers=1)


def _codes(report) -> list[tuple[str, str]]:
    return [(p.code, p.process) for p in report.problems]


async def test_init_with_the_operator_key_trusts_the_node_by_a_signed_event(admin_rt, operator):
    assert await admin_rt.node_trusted()
    async with admin_rt.uow(readonly=True) as uow:
        events = await uow.events.for_process("system-registry")
    assert [(e.action, e.actor) for e in events] == [
        ("grant_role", "system"),
        ("trust_node", operator.public),
    ]
    assert events[1].signer == operator.public  # the operator's own signature
    await Desk(admin_rt, operator).setup()
    assert (await verify_database(admin_rt)).valid
    assert (await _offline(admin_rt)).valid


async def test_an_event_attested_by_a_never_trusted_node_fails_verify(admin_rt, operator, db_url):
    desk = await Desk(admin_rt, operator).setup()
    await desk.ticket_in_review()
    rogue = await Runtime.open(
        Settings(database_url=db_url), create_schema=False, node_key=generate_keypair()
    )
    try:
        assert not await rogue.node_trusted()
        pid = (await start_instance(rogue, desk.admin, TICKET["$path"], {})).record.id
    finally:
        await rogue.close()
    for report in (await verify_database(admin_rt), await _offline(admin_rt)):
        assert ("BAD_SIGNATURE", pid) in _codes(report), report.problems
        assert {p.process for p in report.problems} == {pid}


async def test_trust_then_distrust_a_second_node(admin_rt, operator, db_url):
    desk = await Desk(admin_rt, operator).setup()
    other = await Runtime.open(
        Settings(database_url=db_url), create_schema=False, node_key=generate_keypair()
    )
    try:
        await registry.trust_node(admin_rt, operator, other.node_public)
        assert await other.node_trusted()
        trusted_pid = (await start_instance(other, desk.admin, TICKET["$path"], {})).record.id
        assert (await verify_database(admin_rt)).valid
        assert (await _offline(admin_rt)).valid
        await registry.distrust_node(admin_rt, operator, other.node_public)
        assert not await other.node_trusted()
        late = (await start_instance(other, desk.admin, TICKET["$path"], {})).record.id
    finally:
        await other.close()
    for report in (await verify_database(admin_rt), await _offline(admin_rt)):
        problems = _codes(report)
        assert ("BAD_SIGNATURE", late) in problems
        assert all(p != trusted_pid for _c, p in problems)  # its history still verifies


async def test_trust_and_distrust_by_a_non_admin_or_the_system_actor_are_refused(
    admin_rt, operator
):
    stranger = generate_keypair()
    node = generate_keypair().public
    for action in (registry.trust_node, registry.distrust_node):
        with pytest.raises(DomainError) as caught:
            await action(admin_rt, stranger, node)
        assert caught.value.code == FORBIDDEN
        with pytest.raises(DomainError) as caught:
            await action(admin_rt, stranger.public, node)  # attested for a non-admin
        assert caught.value.code == FORBIDDEN
        with pytest.raises(DomainError) as caught:
            await action(admin_rt, SYSTEM_ACTOR, node)
        assert caught.value.code == FORBIDDEN
    with pytest.raises(DomainError) as caught:
        await registry.trust_node(admin_rt, operator, "not-a-key")
    assert caught.value.code == "INVALID_INPUT"


async def test_a_forged_trust_event_by_a_non_admin_is_flagged_offline(admin_rt, operator):
    """An export with a `trust_node` signed by a non-admin appended (around the write
    path, which refuses it) is reported, and the key it names stays untrusted."""
    from stateward.governance.chain import event_hash

    desk = await Desk(admin_rt, operator).setup()
    stranger, rogue = generate_keypair(), generate_keypair()
    lines = [x async for x in export_lines(admin_rt)]
    last = [x for x in lines if x.get("process") == "system-registry"][-1]
    signed = sign_as(
        admin_rt, stranger, "system-registry", "trust_node", "system/bootstrap",
        {"key": rogue.public},
    )  # fmt: skip
    text = signed.envelope.canonical().decode()
    chained = event_hash(last["hash"], text.encode(), signed.signature)
    forged = {
        "index": max(x["index"] for x in lines if "index" in x) + 1,
        "process": "system-registry", "seq": last["seq"] + 1, "action": "trust_node",
        "version": None, "signer": stranger.public, "signature": signed.signature,
        "prev_hash": last["hash"], "hash": chained,
        "envelope": text,
    }  # fmt: skip
    async with admin_rt.uow(readonly=True) as uow:
        assert not await uow.log.checkpoints()
    report = verify_log(parse_lines(json.dumps(x) for x in [*lines, forged]), workers=1)
    assert _codes(report) == [("NODE_TRUST_FORBIDDEN", "system-registry")]
    del desk


async def test_init_again_with_the_operator_key_trusts_another_node(admin_rt, operator, db_url):
    other = await Runtime.open(
        Settings(database_url=db_url), create_schema=False, node_key=generate_keypair()
    )
    try:
        result = await init(other, operator)
        assert not result.created and result.node_trusted
        assert await other.node_trusted()
        assert not (await init(other, operator)).node_trusted  # already trusted
    finally:
        await other.close()
