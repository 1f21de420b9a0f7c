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
    buffer); an envelope applied before is found before its rows are sent, and one sent
    twice in the batch is applied once: the batch stays buffered."""
    from sqlalchemy import event

    from stateward.persistence import tail, writebuffer
    from stateward.runtime.core.group import act_many

    ids = await _in_review(admin_rt, operator, 3)
    items = [sign_as(admin_rt, operator, ids[i % 3], "note", PATH, {"i": i}) for i in range(20)]
    seen: list[str] = []

    def record(conn, cursor, statement, *args):  # type: ignore[no-untyped-def]
        seen.append(" ".join(statement.split()[:3]))

    target = admin_rt.engine.sync_engine
    flushes, updates = writebuffer.stats["flushes"], writebuffer.stats["updates"]
    inserted, tails = writebuffer.stats["events"], tail.stats["tails"]
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
        # the same statements (one UPDATE executemany, one INSERT of events, one of
        # outbox rows), sent together with the log step and COMMIT in the commit's one
        # round trip to the driver's thread (`persistence/tail.py`), not through SQLAlchemy
        assert writebuffer.stats["flushes"] == flushes + 1
        assert writebuffer.stats["updates"] == updates + 20
        assert writebuffer.stats["events"] == inserted + 20
        assert tail.stats["tails"] == tails + 1
        assert not {"UPDATE processes SET", "INSERT INTO events", "INSERT INTO outbox"} & set(seen)
    unbuffered, resubmitted = committer.unbuffered, committer.resubmitted
    again = sign_as(admin_rt, operator, ids[0], "note", PATH, {"again": 1})
    fresh = sign_as(admin_rt, operator, ids[1], "note", PATH, {"fresh": 1})
    out = await act_many(admin_rt, [again, items[0], fresh, again])
    assert [getattr(r, "duplicate", None) for r in out] == [False, True, False, True]
    assert out[1].event == results[0].event and out[3].event == out[0].event  # type: ignore[union-attr]
    assert committer.unbuffered == unbuffered
    assert committer.resubmitted == resubmitted + 1  # items[0]; `again` twice: one applied
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


async def _batch_as_stored(rt, items, hops):  # type: ignore[no-untyped-def]
    """`act_many(items)`, each answer next to what the database holds for it: (event id,
    stored event id, log index, outbox rows answered, outbox rows stored); `hops` keeps
    only the driver calls made until every answer was given."""
    from stateward.runtime.core.group import act_many

    hops.clear()
    results = await act_many(rt, items)
    made = list(hops)
    assert all(not isinstance(r, BaseException) for r in results)
    rows = []
    async with rt.uow(readonly=True) as uow:
        first = min(m.id for r in results for m in r.outbox)
        stored = {m.id: m for m in await uow.outbox.events_after(first - 1, limit=1000)}
        for r in results:
            [event] = [
                e for e in await uow.events.for_process(r.event.process_id) if e.seq == r.event.seq
            ]
            leaf = await uow.log.leaf_of(event.process_id, event.seq)
            assert leaf is not None
            answered = [(m.id, m.type, m.payload) for m in r.outbox]
            kept = [(i, stored[i].type, stored[i].payload) for i, _, _ in answered]
            rows.append((r.event.id, event.id, leaf[0], answered, kept))
    hops[:] = made
    return rows


async def test_a_batch_ends_in_one_round_trip_to_the_driver(
    admin_rt, operator, monkeypatch, driver_hops
):
    """SQLite: the batch's tail (buffered rows, outbox rows, log step, COMMIT) is ONE call
    on aiosqlite's thread, with nothing sent after it; what is stored and answered is
    what the multi-trip path stores and answers (ids, outbox cursors, log leaves)."""
    if admin_rt.engine.dialect.name != "sqlite":
        pytest.skip("the one-hop tail is SQLite's (PostgreSQL: `onetrip`)")
    from stateward.persistence import uow as uow_module

    ids = await _in_review(admin_rt, operator, 4)
    hops = driver_hops
    items = [sign_as(admin_rt, operator, ids[i % 4], "note", PATH, {"i": i}) for i in range(40)]
    one = await _batch_as_stored(admin_rt, items, hops)
    # the tail is the last driver call before the answers: no COMMIT, no rollback on
    # return to the pool, no statement after it
    assert hops.count("_run") == 1 and hops[-1] == "_run", hops
    assert "commit" not in hops and "rollback" not in hops and "executemany" not in hops
    # and before it, every statement (BEGIN IMMEDIATE, the batch's reads) is one call
    # (`persistence/onehop.py`): no cursor/fetchall/close hops of SQLAlchemy's adapter
    # (BEGIN IMMEDIATE rides with the first of them: `_begun`)
    assert set(hops) <= {"_begun", "_statement", "_statements", "_run"}, hops
    assert hops[0] == "_begun" and hops.count("_begun") == 1, hops

    async def multi_trip(uow):  # type: ignore[no-untyped-def]
        return False  # the path a unit of work with pending ORM objects takes

    monkeypatch.setattr(uow_module, "sequence_and_commit_sqlite", multi_trip)
    hops.clear()
    items = [sign_as(admin_rt, operator, ids[i % 4], "note", PATH, {"j": i}) for i in range(40)]
    other = await _batch_as_stored(admin_rt, items, hops)
    assert "_run" not in hops and "commit" in hops
    for rows in (one, other):
        assert all(answered == stored for _, _, _, answered, stored in rows)
        assert all(event_id == stored_id is not None for event_id, stored_id, *_ in rows)
        indexes = [index for _, _, index, _, _ in rows]
        assert indexes == list(range(indexes[0], indexes[0] + 40))
        cursors = [m for *_, answered, _ in rows for m, _, _ in answered]
        assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors)
    assert other[0][2] == one[-1][2] + 1  # the log goes on gap-free across both paths
    assert [len(a) for *_, a, _ in one] == [len(a) for *_, a, _ in other]
    assert (await verify(admin_rt)).valid


async def test_an_event_alone_in_its_batch_is_buffered_too(admin_rt, operator, driver_hops):
    """SQLite: a batch of one event (an interactive user's action) sends its process
    update and event row with the commit's tail, as a larger batch does, instead of one
    driver call per statement."""
    if admin_rt.engine.dialect.name != "sqlite":
        pytest.skip("the write buffer is SQLite's (PostgreSQL: one request per step)")
    from stateward.persistence import writebuffer

    ids = await _in_review(admin_rt, operator, 1)
    await act(admin_rt, sign_as(admin_rt, operator, ids[0], "note", PATH, {"w": 1}), attested=True)
    driver_hops.clear()
    flushes, updates = writebuffer.stats["flushes"], writebuffer.stats["updates"]
    inserted = writebuffer.stats["events"]
    one = sign_as(admin_rt, operator, ids[0], "note", PATH, {"one": 1})
    result = await act(admin_rt, one, attested=True)
    assert result.event.seq == 4
    assert writebuffer.stats["flushes"] == flushes + 1
    assert (writebuffer.stats["updates"], writebuffer.stats["events"]) == (
        updates + 1,
        inserted + 1,
    )
    # BEGIN with the locked read (which carries the grants generation), this workflow's
    # claimed-assignee read, then the tail: none of them a write
    assert driver_hops == ["_begun", "_statement", "_run"], driver_hops
    async with admin_rt.uow(readonly=True) as uow:
        stored = await uow.events.for_process(ids[0])
    assert [e.seq for e in stored] == [1, 2, 3, 4] and stored[-1].id == result.event.id
    assert (await verify(admin_rt)).valid


async def test_a_bundle_is_queued_for_the_writer_in_one_loop_turn(admin_rt, operator):
    """`act_many`: envelopes that need no read before the writer all reach its queue in
    the same loop turn (one yield for the bundle, not one per item), in list order."""
    from stateward.runtime.core.group import act_many

    ids = await _in_review(admin_rt, operator, 3)
    committer = committer_of(admin_rt)
    items = [sign_as(admin_rt, operator, ids[i % 3], "note", PATH, {"i": i}) for i in range(12)]
    run = asyncio.ensure_future(act_many(admin_rt, items))
    turns = 0
    while committer.queued < len(items) - 1:  # the writer may have taken the first one
        await asyncio.sleep(0)
        turns += 1
        assert turns <= 3, f"{committer.queued} of {len(items)} queued after {turns} turns"
    results = await run
    assert all(not isinstance(r, BaseException) for r in results)
    seqs = [r.event.seq for r in results]  # type: ignore[union-attr]
    assert seqs == [3 + i // 3 for i in range(12)]  # each process's notes in list order


async def test_an_item_that_reads_before_the_writer_is_not_overtaken(
    admin_rt, operator, monkeypatch
):
    """`act_many`: an item that must read before it can be queued (a keyed envelope's
    idempotency check, held back here) keeps every later item out of the writer's queue
    until it is queued — also past a later item answered without the writer (a forged
    signature) — so the events of its process apply in list order."""
    from stateward.governance.envelope import build_envelope
    from stateward.governance.verification import sign_envelope
    from stateward.runtime.core import act as act_module
    from stateward.runtime.core.group import act_many
    from stateward.runtime.core.idempotency import derived_nonce, keyed

    (other,) = await _in_review(admin_rt, operator, 1)
    committer = committer_of(admin_rt)
    lookup = act_module._keyed_original
    go = asyncio.Event()
    looked = 0

    async def held_back(runtime, envelope):  # type: ignore[no-untyped-def]
        nonlocal looked
        looked += 1
        await go.wait()
        return await lookup(runtime, envelope)

    monkeypatch.setattr(act_module, "_keyed_original", held_back)
    pid = "7d7c4f0e-1111-4222-8333-444455556666"
    with keyed("order-test"):
        start = build_envelope(
            admin_rt.net, pid, "$start", PATH, {"data": {}}, operator.public,
            admin_rt.clock.now(), nonce=derived_nonce(operator.public),
        )  # fmt: skip
        forged = sign_as(admin_rt, operator, other, "note", PATH, {"x": 1})
        forged = type(forged)(
            forged.envelope,
            forged.signer,
            sign_as(admin_rt, operator, other, "note", PATH).signature,
        )
        items = [
            sign_envelope(start, operator),  # keyed: reads before it is queued
            forged,  # answered without the writer
            sign_as(admin_rt, operator, pid, "create", PATH, {"name": "Ann"}),
            sign_as(admin_rt, operator, other, "note", PATH, {"y": 1}),
            sign_as(admin_rt, operator, pid, "note", PATH, {}),
        ]
        committed = committer.events
        run = asyncio.ensure_future(act_many(admin_rt, items))
        for _ in range(50):  # the forged item is answered meanwhile (its own read)
            await asyncio.sleep(0.01)
        assert looked == 1 and not run.done()
        # nothing overtook the held-back item: none queued, none committed
        assert committer.queued == 0 and committer.events == committed
        go.set()
        results = await run
    assert isinstance(results[1], DomainError) and results[1].code == "BAD_SIGNATURE"
    ok = [r for n, r in enumerate(results) if n != 1]
    assert all(not isinstance(r, BaseException) for r in ok), results
    assert [r.event.seq for r in ok] == [1, 2, 3, 3]  # type: ignore[union-attr]
    async with admin_rt.uow(readonly=True) as uow:
        events = await uow.events.for_process(pid)
    assert [e.action for e in events] == ["$start", "create", "note"]
    assert (await verify(admin_rt)).valid


async def test_a_bundle_is_queued_without_a_task_per_item_and_keeps_order_and_metrics(
    admin_rt, operator, monkeypatch
):
    """`act_many` (tracing off): envelopes that need no read before the writer are queued
    in the call itself, no `act` task each (`GroupCommitter.queue_now`); from the first
    one that does (here a forged signature: refused after `act`'s resubmission check)
    every later item takes `act`'s chained path, so list order stays. Each item's act
    metric is recorded once, with its outcome, as `observed_act` records it."""
    from stateward.observe import metrics
    from stateward.runtime.core import group

    ids = await _in_review(admin_rt, operator, 3)
    acted: list[int] = []
    real_act = group.act

    async def counting(rt, signed, **kw):  # type: ignore[no-untyped-def]
        acted.append(signed.envelope.action.input.get("i", -1))
        return await real_act(rt, signed, **kw)

    recorded: list[tuple[str, str]] = []
    real_record = metrics.record_act
    monkeypatch.setattr(group, "act", counting)

    def record(op: str, outcome: str, seconds: float) -> None:
        recorded.append((op, outcome))
        real_record(op, outcome, seconds)

    monkeypatch.setattr(metrics, "record_act", record)
    items = [sign_as(admin_rt, operator, ids[i % 3], "note", PATH, {"i": i}) for i in range(8)]
    forged = sign_as(admin_rt, operator, ids[0], "note", PATH, {"i": 4})
    items[4] = type(forged)(forged.envelope, forged.signer, items[0].signature)
    results = await group.act_many(admin_rt, items)
    assert acted == [4, 5, 6, 7]  # the forged one and every item after it
    assert isinstance(results[4], DomainError) and results[4].code == "BAD_SIGNATURE"
    ok = [r for n, r in enumerate(results) if n != 4]
    assert all(not isinstance(r, BaseException) for r in ok)
    seqs = {pid: [r.event.seq for r in ok if r.record.id == pid] for pid in ids}  # type: ignore[union-attr]
    assert all(s == sorted(s) and len(s) == len(set(s)) for s in seqs.values())
    assert sorted(recorded) == sorted([("business", "ok")] * 7 + [("business", "BAD_SIGNATURE")])
    assert (await verify(admin_rt)).valid


async def test_envelopes_applied_before_leave_a_batch_without_a_run_of_their_own(
    admin_rt, operator
):
    """A client catching up sends envelopes the log holds already among new ones: they are
    answered as resubmissions (the original event, duplicate; REPLAYED for a used nonce
    under another envelope) and the rest of the batch is applied buffered, once, not
    once more per resubmission (before: 10 % of a batch resent ran it ~25× slower)."""
    from stateward.governance.envelope import build_envelope
    from stateward.governance.verification import sign_envelope
    from stateward.runtime.core.group import act_many

    ids = await _in_review(admin_rt, operator, 4)
    sent = [sign_as(admin_rt, operator, ids[i % 4], "note", PATH, {"i": i}) for i in range(12)]
    first = await act_many(admin_rt, sent)
    assert all(not isinstance(r, BaseException) and not r.duplicate for r in first)  # type: ignore[union-attr]
    replay = build_envelope(
        admin_rt.net, ids[0], "note", PATH, {"other": 1}, operator.public,
        admin_rt.clock.now(), nonce=sent[0].envelope.nonce,
    )  # fmt: skip
    fresh = [sign_as(admin_rt, operator, ids[i % 4], "note", PATH, {"new": i}) for i in range(20)]
    mixed = [*fresh[:5], *sent[::2], sign_envelope(replay, operator), *fresh[5:]]
    committer = committer_of(admin_rt)
    unbuffered, resubmitted = committer.unbuffered, committer.resubmitted
    out = await act_many(admin_rt, mixed)
    old = out[5:11]
    assert all(not isinstance(r, BaseException) and r.duplicate for r in old)  # type: ignore[union-attr]
    assert [r.event for r in old] == [r.event for r in first[::2]]  # type: ignore[union-attr]
    assert isinstance(out[11], DomainError) and out[11].code == "REPLAYED"
    new = [*out[:5], *out[12:]]
    assert all(not isinstance(r, BaseException) and not r.duplicate for r in new)  # type: ignore[union-attr]
    assert committer.resubmitted == resubmitted + 7  # six resent, one replayed nonce
    assert committer.unbuffered == unbuffered
    async with admin_rt.uow(readonly=True) as uow:
        notes = [(await uow.processes.get(pid)).data["notes"] for pid in ids]  # type: ignore[union-attr]
    assert sum(notes) == 12 + 20
    assert (await verify(admin_rt)).valid


async def test_a_repeat_of_a_refused_envelope_gets_the_same_refusal(admin_rt, operator):
    """The same envelope twice in one batch, refused by the engine: both get its error
    (the repeat is answered from the first, not applied again)."""
    from stateward.runtime.core.group import act_many

    ids = await _in_review(admin_rt, operator, 2)
    bad = sign_as(admin_rt, operator, ids[0], "create", PATH, {"name": "again"})  # WRONG_STATE
    good = sign_as(admin_rt, operator, ids[1], "note", PATH, {})
    out = await act_many(admin_rt, [bad, good, bad])
    assert isinstance(out[0], DomainError) and out[0].code == "WRONG_STATE"
    assert isinstance(out[2], DomainError) and out[2].code == "WRONG_STATE"
    assert not isinstance(out[1], BaseException) and not out[1].duplicate  # type: ignore[union-attr]


async def test_many_copies_of_one_envelope_in_a_batch_apply_it_once(admin_rt, operator):
    """50 copies of one envelope in one bundle (a client's retry loop, or a request built
    to cost the writer): applied once, the other 49 answered as its duplicates, the batch
    never run again without its buffer."""
    from stateward.runtime.core.group import act_many

    (pid,) = await _in_review(admin_rt, operator, 1)
    signed = sign_as(admin_rt, operator, pid, "note", PATH, {"copy": True})
    committer = committer_of(admin_rt)
    unbuffered = committer.unbuffered
    out = await act_many(admin_rt, [signed] * 50)
    assert [r.duplicate for r in out] == [False] + [True] * 49  # type: ignore[union-attr]
    assert len({r.event.id for r in out}) == 1  # type: ignore[union-attr]
    assert committer.unbuffered == unbuffered
    async with admin_rt.uow(readonly=True) as uow:
        assert (await uow.processes.get(pid)).data["notes"] == 1  # type: ignore[union-attr]
