"""The deployment log: every committed event gets a gap-free log index and a leaf in one
Merkle tree; proofs verify; checkpoints are signed, kept and announced."""

from __future__ import annotations

import asyncio

from kernel_fixtures import TICKET, Desk
from sqlalchemy import text

from stateward.domain import merkle
from stateward.domain.logformat import event_leaf_hash
from stateward.governance.checkpoint import parse_checkpoint, verify_checkpoint
from stateward.governance.keys import generate_keypair
from stateward.records import OutboxFilter
from stateward.runtime.core.act import act
from stateward.runtime.core.commands import sign_as
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.checkpoints import checkpoint
from stateward.runtime.insight.proofs import consistency_proof, event_proof
from stateward.settings import Settings


async def log_of(rt: Runtime) -> list[tuple[int, str, int, bytes]]:
    """(index, process, seq, leaf hash) of every logged event, in index order."""
    async with rt.uow(readonly=True) as uow:
        rows = await uow.log.events(limit=100000)
    return [
        (
            i,
            e.process_id,
            e.seq,
            bytes.fromhex(event_leaf_hash(e.process_id, e.seq, e.signer, e.hash)),
        )
        for i, e in rows
    ]


async def test_every_event_gets_a_gap_free_index_and_the_root_is_the_rfc_tree(admin_rt, operator):
    desk = await Desk(admin_rt, operator).setup()
    for _ in range(3):
        await desk.ticket_in_review()
    leaves = await log_of(admin_rt)
    async with admin_rt.uow(readonly=True) as uow:
        size, root = await uow.log.head()
        assert await uow.log.unlogged_events() == 0
    assert [i for i, *_ in leaves] == list(range(size))
    assert size >= 8
    assert root == merkle.root_of([leaf for *_, leaf in leaves]).hex()
    for index, process, seq, leaf in leaves:
        proof = await event_proof(admin_rt, process, seq)
        assert proof.index == index and proof.leaf == leaf.hex()
        path = [bytes.fromhex(h) for h in proof.path]
        assert merkle.verify_inclusion(leaf, index, size, path, bytes.fromhex(root))


async def test_proofs_for_older_trees_and_consistency_between_them(admin_rt, operator):
    desk = await Desk(admin_rt, operator).setup()
    await desk.ticket_in_review()
    leaves = await log_of(admin_rt)
    for first in range(1, len(leaves) + 1):
        c = await consistency_proof(admin_rt, first)
        assert c.first_root == merkle.root_of([x[3] for x in leaves[:first]]).hex()
        assert merkle.verify_consistency(
            first, c.second, bytes.fromhex(c.first_root), bytes.fromhex(c.second_root),
            [bytes.fromhex(h) for h in c.path],
        )  # fmt: skip
    old = await event_proof(admin_rt, leaves[0][1], leaves[0][2], size=3)
    assert old.size == 3 and old.root == merkle.root_of([x[3] for x in leaves[:3]]).hex()


async def test_group_commit_keeps_the_index_gap_free(admin_rt, operator):
    desk = await Desk(admin_rt, operator).setup()
    ids = [await desk.ticket_in_review() for _ in range(4)]
    signed = [sign_as(admin_rt, operator, ids[i % 4], "note", TICKET["$path"], {"text": str(i)})
              for i in range(40)]  # fmt: skip
    await asyncio.gather(*(act(admin_rt, s, attested=False) for s in signed))
    leaves = await log_of(admin_rt)
    assert [i for i, *_ in leaves] == list(range(len(leaves)))
    async with admin_rt.uow(readonly=True) as uow:
        assert (await uow.log.head())[0] == len(leaves)
        assert await uow.log.unlogged_events() == 0


async def test_a_checkpoint_is_signed_kept_and_announced_only_when_the_log_grew(admin_rt, operator):
    first = await checkpoint(admin_rt)
    assert first is not None
    assert await checkpoint(admin_rt) is None  # nothing new
    parsed = parse_checkpoint(first.as_json())
    verify_checkpoint(parsed, net=admin_rt.net, trusted={admin_rt.node_public})
    async with admin_rt.uow(readonly=True) as uow:
        assert (parsed.size, parsed.root) == await uow.log.head()
        rows = await uow.outbox.events_after(0, OutboxFilter(types=("log.checkpoint",)))
    assert [r.payload["details"] for r in rows] == [first.as_json()]
    await Desk(admin_rt, operator).setup()
    second = await checkpoint(admin_rt)
    assert second is not None and second.size > first.size


async def test_two_nodes_appending_at_once_keep_one_gap_free_log_and_agree(db_url):
    """Two runtimes on one database (on SQLite: one file, two engines, so each finds the
    head moved by the other and reads it again) keep one gap-free log."""
    operator = generate_keypair()
    a = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    b = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    try:
        from stateward.runtime.access.genesis import init

        await init(a, operator)
        await init(b, operator)  # trusts b's node key (a `trust_node` by the operator)
        desk = await Desk(a, operator).setup()
        await b.refresh_trusted()
        ids = [await desk.ticket_in_review() for _ in range(4)]

        async def node(rt: Runtime, tag: str) -> None:
            for i in range(30):
                s = sign_as(
                    rt, operator, ids[i % 4], "note", TICKET["$path"], {"text": f"{tag}{i}"}
                )
                await act(rt, s, attested=False)

        await asyncio.gather(node(a, "a"), node(b, "b"), node(a, "c"), node(b, "d"))
        leaves = await log_of(a)
        assert [i for i, *_ in leaves] == list(range(len(leaves)))
        cp_a, cp_b = await checkpoint(a), await checkpoint(b)
        assert cp_a is not None and cp_b is not None
        assert (cp_a.size, cp_a.root) == (cp_b.size, cp_b.root) == (
            len(leaves), merkle.root_of([x[3] for x in leaves]).hex()
        )  # fmt: skip
    finally:
        await a.close()
        await b.close()


async def test_offline_verify_checks_signatures_in_worker_threads(admin_rt, operator, tmp_path):
    import json as _json

    from stateward.runtime.insight.logfile import export_lines, parse_lines
    from stateward.runtime.insight.logverify import verify_log

    await Desk(admin_rt, operator).setup()
    lines = [line async for line in export_lines(admin_rt)]
    texts = [_json.dumps(x) for x in lines]
    assert verify_log(parse_lines(texts), workers=2, parallel_from=0).valid
    victim = next(n for n, x in enumerate(lines) if x.get("index") == 3)
    sig = lines[victim]["signature"]
    lines[victim] = {**lines[victim], "signature": ("A" if sig[0] != "A" else "B") + sig[1:]}
    texts = [_json.dumps(x) for x in lines]
    for workers in (1, 2):
        report = verify_log(parse_lines(texts), workers=workers, parallel_from=0)
        assert [p.code for p in report.problems if p.code == "BAD_SIGNATURE"] == ["BAD_SIGNATURE"]


async def test_the_export_reads_the_same_from_text_or_bytes_and_refuses_bad_lines(
    admin_rt, operator, tmp_path
):
    """`read_log` parses bytes with orjson: the same events as text lines; a line that is
    not UTF-8, an index that is a boolean, a missing key, are INVALID_INPUT naming the
    line (invalid UTF-8 used to escape as UnicodeDecodeError)."""
    import gc
    import json as _json

    import pytest

    from stateward.domain.errors import DomainError
    from stateward.runtime.insight.logfile import export_lines, no_gc, parse_lines, read_log
    from stateward.runtime.insight.logverify import check_event, verify_log

    await Desk(admin_rt, operator).setup()
    lines = [_json.dumps(x) for x in [line async for line in export_lines(admin_rt)]]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    from_text, from_file = parse_lines(lines), read_log(str(path))
    assert from_file.events == from_text.events and len(from_file.events) == len(lines) - 1
    assert from_file.checkpoints == from_text.checkpoints
    assert [check_event(e) for e in from_file.events] == [check_event(e) for e in from_text.events]
    assert verify_log(from_file, workers=1).valid
    one = next(line for line in lines[1:] if '"index"' in line)
    event = _json.loads(one)
    for bad, message in (
        ({**event, "index": True}, "index must be an integer"),
        ({**event, "version": "1"}, "version must be an integer"),
        ({k: v for k, v in event.items() if k != "hash"}, "exactly the keys"),
    ):
        with pytest.raises(DomainError, match=message):
            parse_lines([lines[0], _json.dumps(bad)])
    path.write_bytes(lines[0].encode() + b"\n" + one.encode()[:-2] + b'\xff"}\n')
    with pytest.raises(DomainError, match="log line 2: not JSON"):
        read_log(str(path))
    assert gc.isenabled()
    with no_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with no_gc():
            pass
        assert not gc.isenabled()  # the caller's choice is kept
    finally:
        gc.enable()


async def test_the_one_trip_sequencer_step_gives_the_stored_outbox_ids_and_recovers_a_moved_head(
    postgres_db_url,
):
    """PostgreSQL sends the sequencer step with COMMIT in one request (persistence/
    onetrip.py): the outbox ids it derives after COMMIT are the stored rows' ids, a head
    moved by another node (a guess miss) is read again under the lock, and no session is
    left holding the sequencer lock."""
    from stateward.persistence import onetrip
    from stateward.persistence.sequencer import SEQUENCER_LOCK_KEY
    from stateward.runtime.access.genesis import init

    operator = generate_keypair()
    a = await Runtime.open(Settings(database_url=postgres_db_url), node_key=generate_keypair())
    b = await Runtime.open(Settings(database_url=postgres_db_url), node_key=generate_keypair())
    try:
        await init(a, operator)
        await init(b, operator)
        desk = await Desk(a, operator).setup()
        await b.refresh_trusted()
        pid = await desk.ticket_in_review()
        misses = onetrip.stats["misses"]
        results = []
        for i in range(6):  # alternate nodes: each write finds the head the other moved
            rt = (a, b)[i % 2]
            s = sign_as(rt, operator, pid, "note", TICKET["$path"], {"text": f"it's {i}"})
            results.append(await act(rt, s, attested=False))
        assert onetrip.stats["misses"] > misses
        async with a.uow(readonly=True) as uow:
            stored = {r.id: r for r in await uow.outbox.events_after(0, limit=100000)}
        # Only this test's database counts (other tests share the server), and a holder
        # that lets go is a writer at work (a node's sweep or checkpoint), not a leak: a
        # leaked lock is still held seconds later.
        held_query = text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = :k"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        for _ in range(50):
            async with a.uow(readonly=True) as uow:
                held = await uow.session.execute(held_query, {"k": SEQUENCER_LOCK_KEY & 0xFFFFFFFF})
                if held.scalar_one() == 0:
                    break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("a session still holds the sequencer lock after 5 s")
        for result in results:
            assert result.outbox
            for record in result.outbox:
                row = stored[record.id]
                assert (row.type, row.instance_id, row.payload) == (
                    record.type, record.instance_id, record.payload
                )  # fmt: skip
                assert row.payload["seq"] == result.event.seq
        leaves = await log_of(a)
        assert [i for i, *_ in leaves] == list(range(len(leaves)))
        async with a.uow(readonly=True) as uow:
            assert (await uow.log.head())[0] == len(leaves)
            assert await uow.log.unlogged_events() == 0
    finally:
        await a.close()
        await b.close()


def test_the_replay_snapshot_is_a_process_snapshot_with_every_field():
    """The offline replay builds snapshots without the dataclass __init__; they must be
    equal to the real thing, field for field (a new field must be added there too)."""
    import dataclasses

    from stateward.domain.model import ProcessSnapshot
    from stateward.runtime.insight.logverify import _snapshot

    args = ("p", "a/b", 2, "open", "active", {"n": 1}, "key", 3)
    fast = _snapshot(*args)
    real = ProcessSnapshot("p", "a/b", 2, "open", "active", {"n": 1}, "key", None, 3, None)
    assert fast == real and vars(fast) == vars(real)
    assert set(vars(fast)) == {f.name for f in dataclasses.fields(ProcessSnapshot)}
