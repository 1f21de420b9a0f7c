"""Group commit: several events per transaction, each still all-or-nothing."""

from __future__ import annotations

import asyncio

import pytest
from runtime_definitions import ONBOARDING, REVIEW, allow_onboarding_spawns

from stateward.domain.errors import DomainError
from stateward.runtime.access import registry
from stateward.runtime.core.act import act
from stateward.runtime.core.commands import perform_action, sign_as, start_instance
from stateward.runtime.core.group import committer_of
from stateward.runtime.insight.verify import verify

PATH = ONBOARDING["$path"]


async def _in_review(rt, operator, n: int = 3) -> list[str]:  # type: ignore[no-untyped-def]
    await registry.deploy_workflow(rt, operator, REVIEW)
    await allow_onboarding_spawns(rt, operator)
    await registry.deploy_workflow(rt, operator, ONBOARDING)
    ids = []
    for _ in range(n):
        pid = (await start_instance(rt, operator.public, PATH)).record.id
        await perform_action(rt, operator.public, pid, "create", {"name": "Ann"})
        ids.append(pid)
    return ids


async def test_a_refused_event_in_a_batch_leaves_the_others_committed(admin_rt, operator):
    ids = await _in_review(admin_rt, operator)
    good = [sign_as(admin_rt, operator, ids[i % 3], "note", PATH, {"i": i}) for i in range(12)]
    bad = sign_as(admin_rt, operator, ids[0], "create", PATH, {"name": "again"})  # WRONG_STATE
    results = await asyncio.gather(
        *(act(admin_rt, s, attested=False) for s in [*good[:6], bad, *good[6:]]),
        return_exceptions=True,
    )
    assert isinstance(results[6], DomainError) and results[6].code == "WRONG_STATE"
    assert all(not isinstance(r, BaseException) for i, r in enumerate(results) if i != 6)
    assert committer_of(admin_rt).events >= 12
    async with admin_rt.uow(readonly=True) as uow:
        notes = [
            (await uow.processes.get(pid)).data.get("notes")  # type: ignore[union-attr]
            for pid in ids
        ]
    assert notes == [4, 4, 4]
    assert (await verify(admin_rt)).valid


async def test_the_same_envelope_twice_in_one_batch_is_applied_once(admin_rt, operator):
    (pid,) = await _in_review(admin_rt, operator, 1)
    signed = sign_as(admin_rt, operator, pid, "note", PATH, {})
    first, second = await asyncio.gather(
        act(admin_rt, signed, attested=False), act(admin_rt, signed, attested=False)
    )
    assert sorted([first.duplicate, second.duplicate]) == [False, True]
    assert first.event == second.event
    async with admin_rt.uow(readonly=True) as uow:
        assert (await uow.processes.get(pid)).data["notes"] == 1  # type: ignore[union-attr]


async def test_a_reused_nonce_in_one_batch_is_replayed(admin_rt, operator):
    from stateward.governance.envelope import build_envelope
    from stateward.governance.verification import sign_envelope

    (pid,) = await _in_review(admin_rt, operator, 1)
    signed = sign_as(admin_rt, operator, pid, "note", PATH, {"a": 1})
    other = build_envelope(
        admin_rt.net,
        pid,
        "note",
        PATH,
        {"a": 2},
        operator.public,
        admin_rt.clock.now(),
        nonce=signed.envelope.nonce,
    )
    results = await asyncio.gather(
        act(admin_rt, signed, attested=False),
        act(admin_rt, sign_envelope(other, operator), attested=False),
        return_exceptions=True,
    )
    assert not isinstance(results[0], BaseException)
    assert isinstance(results[1], DomainError) and results[1].code == "REPLAYED"


@pytest.mark.parametrize("group", [True, False])
async def test_both_paths_give_the_same_log(admin_rt, operator, group):
    admin_rt.group_commit = group
    ids = await _in_review(admin_rt, operator, 2)
    await asyncio.gather(
        *(perform_action(admin_rt, operator.public, ids[i % 2], "note", {}) for i in range(10))
    )
    async with admin_rt.uow(readonly=True) as uow:
        for pid in ids:
            events = await uow.events.for_process(pid)
            assert [e.seq for e in events] == list(range(1, 8))
    assert (await verify(admin_rt)).valid


async def test_a_batch_sends_its_process_updates_and_event_rows_together(admin_rt, operator):
    """SQLite: one batch of plain events is one UPDATE and one INSERT of events (the write
    buffer); a duplicate inside the batch is found by applying it again unbuffered."""
    from sqlalchemy import event

    from stateward.runtime.core.group import act_many

    ids = await _in_review(admin_rt, operator, 3)
    items = [sign_as(admin_rt, operator, ids[i % 3], "note", PATH, {"i": i}) for i in range(20)]
    seen: list[str] = []

    def record(conn, cursor, statement, *args):  # type: ignore[no-untyped-def]
        seen.append(" ".join(statement.split()[:3]))

    target = admin_rt.engine.sync_engine
    event.listen(target, "before_cursor_execute", record)
    try:
        results = await act_many(admin_rt, items)
    finally:
        event.remove(target, "before_cursor_execute", record)
    assert all(not isinstance(r, BaseException) for r in results)
    assert [r.event.seq for r in results[:3]] == [3, 3, 3]  # type: ignore[union-attr]
    assert len({r.event.id for r in results}) == 20  # type: ignore[union-attr]
    cursors = [m.id for r in results for m in r.outbox]  # type: ignore[union-attr]
    assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors) >= 20
    async with admin_rt.uow(readonly=True) as uow:  # the stored rows are the answered ones
        stored = {m.id: m for m in await uow.outbox.events_after(cursors[0] - 1, limit=100)}
    answered = [(m.id, m.type, m.payload) for r in results for m in r.outbox]  # type: ignore[union-attr]
    assert answered == [(i, stored[i].type, stored[i].payload) for i, _, _ in answered]
    committer = committer_of(admin_rt)
    if admin_rt.engine.dialect.name == "sqlite":
        assert seen.count("UPDATE processes SET") == 1
        assert seen.count("INSERT INTO events") == 1
        assert seen.count("INSERT INTO outbox") == 1
    unbuffered = committer.unbuffered
    again = sign_as(admin_rt, operator, ids[0], "note", PATH, {"again": 1})
    fresh = sign_as(admin_rt, operator, ids[1], "note", PATH, {"fresh": 1})
    out = await act_many(admin_rt, [again, items[0], fresh, again])
    assert [getattr(r, "duplicate", None) for r in out] == [False, True, False, True]
    if admin_rt.engine.dialect.name == "sqlite":
        assert committer.unbuffered == unbuffered + 1
    async with admin_rt.uow(readonly=True) as uow:
        assert [e.seq for e in await uow.events.for_process(ids[0])] == list(range(1, 11))
    assert (await verify(admin_rt)).valid


async def test_a_forged_signature_in_a_worker_checked_batch_is_refused_alone(admin_rt, operator):
    """`act_many` with MIN_BATCH or more client-signed envelopes: their signatures are
    checked in the signature worker's process; a forged one is BAD_SIGNATURE alone, the
    others are applied, and the log verifies."""
    from stateward.governance.sigworker import MIN_BATCH, worker_enabled
    from stateward.runtime.core.group import act_many

    ids = await _in_review(admin_rt, operator)
    items = [sign_as(admin_rt, operator, ids[i % 3], "note", PATH, {"i": i}) for i in range(20)]
    other = sign_as(admin_rt, operator, ids[0], "note", PATH, {"i": 99})
    items[7] = type(items[7])(items[7].envelope, items[7].signer, other.signature)
    assert len(items) >= MIN_BATCH
    results = await act_many(admin_rt, items, attested=False)
    assert isinstance(results[7], DomainError) and results[7].code == "BAD_SIGNATURE"
    assert all(not isinstance(r, BaseException) for n, r in enumerate(results) if n != 7)
    worker = committer_of(admin_rt).signatures
    if worker_enabled():
        assert worker is not None and worker.checked == 20
    async with admin_rt.uow(readonly=True) as uow:
        notes = [(await uow.processes.get(p)).data.get("notes") for p in ids]  # type: ignore[union-attr]
    assert sum(notes) == 19  # every note of the batch but the forged one
    assert (await verify(admin_rt)).valid
