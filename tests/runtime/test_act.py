"""`act`, the one path: what it accepts, what it refuses, and what it writes."""

from __future__ import annotations

import pytest
from runtime_definitions import ONBOARDING, allow_onboarding_spawns

from stateward.domain.errors import DomainError
from stateward.governance.envelope import SignedEnvelope, build_envelope
from stateward.governance.keys import KeyPair, generate_keypair
from stateward.governance.verification import sign_envelope
from stateward.runtime.access.registry import deploy_workflow, grant_role
from stateward.runtime.core.act import act, parse_signed
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.core.commands import attest, perform_action, sign_as, start_instance
from stateward.runtime.core.services import Runtime

PATH = ONBOARDING["$path"]


async def _instance(rt: Runtime, operator: KeyPair) -> str:
    await deploy_workflow(rt, operator, _review())
    await allow_onboarding_spawns(rt, operator)
    await deploy_workflow(rt, operator, ONBOARDING)
    started = await start_instance(rt, operator.public, PATH, {"x": 1})
    return started.record.id


def _review() -> dict:
    from runtime_definitions import REVIEW

    return REVIEW


def _create(rt: Runtime, key: KeyPair, pid: str, name: str = "Ann") -> SignedEnvelope:
    return sign_as(rt, key, pid, "create", PATH, {"name": name})


async def _codes(coro) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(DomainError) as info:
        await coro
    return info.value.code


async def test_a_client_signed_action_is_applied_and_chained(admin_rt, operator):
    pid = await _instance(admin_rt, operator)
    result = await act(admin_rt, _create(admin_rt, operator, pid), attested=False)
    assert not result.duplicate
    assert result.event.seq == 2
    assert result.event.signer == operator.public
    assert result.record.state == "review"
    assert result.record.data["name"] == "Ann"
    assert result.record.sla_due_at is not None
    assert [m.type for m in result.outbox] == ["workflow.advanced", "workflow.assigned"]
    assert result.outbox[1].payload["assignmentId"]
    assert "data" not in result.outbox[0].payload


async def test_a_forged_signature_is_refused(admin_rt, operator):
    pid = await _instance(admin_rt, operator)
    signed = _create(admin_rt, operator, pid)
    other = sign_envelope(signed.envelope, generate_keypair())
    forged = SignedEnvelope(signed.envelope, operator.public, other.signature)
    error = await _codes(act(admin_rt, forged, attested=False))
    assert error == "BAD_SIGNATURE"


async def test_only_this_nodes_own_attested_signature_skips_the_check(admin_rt, operator):
    pid = await _instance(admin_rt, operator)
    signed = _create(admin_rt, operator, pid)
    other = sign_envelope(signed.envelope, generate_keypair())
    forged = SignedEnvelope(signed.envelope, operator.public, other.signature)
    # attested=True does not let another key's bad signature through
    assert await _codes(act(admin_rt, forged, attested=True)) == "BAD_SIGNATURE"
    # and a node-key signature from client input (attested=False) is checked
    own = attest(admin_rt, operator.public, pid, "create", PATH, {"name": "Ann"})
    bad = SignedEnvelope(own.envelope, own.signer, other.signature)
    assert await _codes(act(admin_rt, bad, attested=False)) == "BAD_SIGNATURE"
    result = await act(admin_rt, own, attested=True)  # the fresh own signature: applied
    assert result.event.signer == admin_rt.node_public


async def test_an_envelope_from_another_net_is_refused(admin_rt, operator):
    pid = await _instance(admin_rt, operator)
    envelope = build_envelope(
        "another-net", pid, "create", PATH, {}, operator.public, admin_rt.clock.now()
    )
    with pytest.raises(DomainError) as info:
        await act(admin_rt, sign_envelope(envelope, operator), attested=False)
    assert info.value.code == "BAD_SIGNATURE"
    assert info.value.details["reason"] == "wrong_net"


async def test_an_untrusted_signer_cannot_speak_for_another_actor(admin_rt, operator):
    pid = await _instance(admin_rt, operator)
    envelope = build_envelope(
        admin_rt.net, pid, "create", PATH, {}, operator.public, admin_rt.clock.now()
    )
    with pytest.raises(DomainError) as info:
        await act(admin_rt, sign_envelope(envelope, generate_keypair()), attested=False)
    assert info.value.details["reason"] == "untrusted_signer"


async def test_a_revoked_key_is_refused_from_the_revocation_on(admin_rt, operator):
    from stateward.runtime.access.registry import revoke_key

    pid = await _instance(admin_rt, operator)
    member = generate_keypair()
    await grant_role(admin_rt, operator, "customer", member.public, ["analyst"])
    early = _create(admin_rt, member, pid)
    admin_rt.clock.advance(1)  # type: ignore[attr-defined]
    await revoke_key(admin_rt, operator, member.public)
    admin_rt.clock.advance(1)  # type: ignore[attr-defined]
    with pytest.raises(DomainError) as info:
        await act(admin_rt, _create(admin_rt, member, pid), attested=False)
    assert info.value.details["reason"] == "revoked"
    with pytest.raises(DomainError) as info:  # signed before, submitted after: still refused
        await act(admin_rt, early, attested=False)
    assert info.value.details["reason"] == "revoked"


async def test_a_reused_nonce_with_other_content_is_replayed(admin_rt, operator):
    pid = await _instance(admin_rt, operator)
    first = _create(admin_rt, operator, pid)
    await act(admin_rt, first, attested=False)
    again = build_envelope(
        admin_rt.net,
        pid,
        "note",
        PATH,
        {},
        operator.public,
        admin_rt.clock.now(),
        nonce=first.envelope.nonce,
    )
    assert await _codes(act(admin_rt, sign_envelope(again, operator), attested=False)) == "REPLAYED"


async def test_resubmitting_the_same_envelope_returns_the_original_event(admin_rt, operator):
    pid = await _instance(admin_rt, operator)
    signed = _create(admin_rt, operator, pid)
    first = await act(admin_rt, signed, attested=False)
    admin_rt.clock.advance(3600)  # type: ignore[attr-defined]  (long after the ±300 s window)
    second = await act(admin_rt, parse_signed(signed.to_json()), attested=False)
    assert second.duplicate
    assert second.event == first.event
    assert second.record.seq == 2


@pytest.mark.parametrize("skew", [-301, 301])
async def test_stale_and_future_timestamps_are_refused(admin_rt, operator, skew):
    pid = await _instance(admin_rt, operator)
    clock: ManualClock = admin_rt.clock  # type: ignore[assignment]
    signed = _create(admin_rt, operator, pid)
    clock.advance(-skew)
    with pytest.raises(DomainError) as info:
        await act(admin_rt, signed, attested=False)
    assert info.value.details["reason"] == ("stale" if skew < 0 else "future")


async def test_json_that_canonical_form_cannot_carry_is_refused_before_anything(admin_rt, operator):
    pid = await _instance(admin_rt, operator)
    body = _create(admin_rt, operator, pid).to_json()
    text = str(body).replace("'", '"').replace('"Ann"', "NaN")
    with pytest.raises(DomainError) as info:
        parse_signed(text)
    assert info.value.code == "INVALID_JSON"
    big = dict(
        body, event=dict(body["event"], action={**body["event"]["action"], "input": {"n": 2**60}})
    )
    with pytest.raises(DomainError) as info:
        parse_signed(big)
    assert info.value.code == "INVALID_INPUT"


async def test_unknown_process_is_not_found(admin_rt, operator):
    await _instance(admin_rt, operator)
    signed = attest(admin_rt, operator.public, "no-such-process", "create", PATH, {})
    assert await _codes(act(admin_rt, signed, attested=True)) == "NOT_FOUND"


async def test_a_rule_of_the_engine_rejects_and_writes_nothing(admin_rt, operator):
    pid = await _instance(admin_rt, operator)
    member = generate_keypair()  # may read the instance, lacks the action's role
    await grant_role(admin_rt, operator, PATH.rsplit("/", 1)[0], member.public, ["viewer"])
    with pytest.raises(DomainError) as info:
        await perform_action(admin_rt, member.public, pid, "create", {"name": "x"})
    assert info.value.code == "FORBIDDEN"
    outsider = generate_keypair()  # may not read it: the same answer as a missing id
    with pytest.raises(DomainError) as info:
        await perform_action(admin_rt, outsider.public, pid, "create", {"name": "x"})
    assert info.value.code == "NOT_FOUND"
    async with admin_rt.uow(readonly=True) as uow:
        assert await uow.events.count(pid) == 1


async def test_advance_records_the_action_it_resolved(admin_rt, operator):
    from stateward.runtime.core.commands import advance_instance

    pid = await _instance(admin_rt, operator)
    result = await advance_instance(admin_rt, operator.public, pid, {"name": "Bo"})
    assert result.event.action == "create"
    assert result.record.state == "review"


async def test_spawn_creates_children_with_their_own_start_event(admin_rt, operator):
    pid = await _instance(admin_rt, operator)
    await perform_action(admin_rt, operator.public, pid, "create", {"name": "Ann"})
    result = await perform_action(admin_rt, operator.public, pid, "approve", {})
    assert result.record.status == "completed"
    (child,) = result.children
    assert result.record.data["reviews"] == [child.id]
    async with admin_rt.uow(readonly=True) as uow:
        (start,) = await uow.events.for_process(child.id)
    assert start.action == "$start"
    # Into another namespace (granted by `allow_spawn`): as the spawning actor, at the
    # child's initial state, linked to its parent by the runtime (not by the `$start`
    # input, which carries no parent data: spawns within a namespace: tests/api).
    assert start.actor == operator.public and child.parent_id == pid
    assert "parent" not in start.input and "parent_data" not in start.input
    assert start.signer == admin_rt.node_public
    assert {m.type for m in result.outbox} >= {"workflow.started", "workflow.completed"}


async def test_publishers_receive_the_committed_messages(admin_rt, operator):
    seen: list[dict] = []

    async def publisher(messages):  # type: ignore[no-untyped-def]
        seen.extend(messages)

    admin_rt.publishers.append(publisher)
    pid = await _instance(admin_rt, operator)
    assert [m["type"] for m in seen if m["instanceId"] == pid] == ["workflow.started"]
    assert all(isinstance(m["id"], int) for m in seen)
