"""The process data cache (issue 18): a locked read takes the data a runtime already
holds only while the row is at the same head_hash; every write stores the new data
exactly; a write that was rolled back is never served; an event that leaves the data
alone does not rewrite it; on SQLite, large data keeps its stored length through small
edits (padding) and still reads, searches and verifies as the data. Every test but the
padding's runs on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import text

from stateward.domain.search import DataCondition, InstanceSearch
from stateward.governance.keys import KeyPair, generate_keypair
from stateward.persistence import UnitOfWorkFactory
from stateward.persistence.db import loads_json
from stateward.runtime.access import registry
from stateward.runtime.core.act import ActResult, act
from stateward.runtime.core.commands import sign_as, start_instance
from stateward.runtime.core.queries import search_instances
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.verify import verify
from stateward.settings import Settings
from tests.counter_workflow import counter_workflow

PATH = "tests/cache/counter"
COUNTER = counter_workflow(
    PATH,
    note={"label": "Note", "from": "open", "mutate": {"$set": {"note": "input.note"}}},
    add={"label": "Add", "from": "open", "mutate": {"$append": {"items": "input.item"}}},
    touch={"label": "Touch", "from": "open"},
)
ITEMS = [{"id": i, "name": f"item-{i}", "note": "n" * 48} for i in range(200)]
#: The data `$start` gives the instance (the engine adds the state it starts in).
BIG = {"items": ITEMS, "state": "open"}


async def _act(rt: Runtime, key: KeyPair, pid: str, action: str, data: Any = None) -> ActResult:
    return await act(rt, sign_as(rt, key, pid, action, PATH, data or {}), attested=False)


async def _stored(url: str, pid: str) -> tuple[int, dict[str, Any]]:
    """(seq, data) of the row read without any cache: a fresh engine, the raw column."""
    other = await Runtime.open(Settings(database_url=url), node_key=generate_keypair())
    try:
        async with other.uow(readonly=True) as uow:
            row = (
                await uow.session.execute(
                    text(
                        "SELECT seq, CAST(data AS TEXT) FROM processes JOIN process_data "
                        "ON process_id = id WHERE id = :id"
                    ),
                    {"id": pid},
                )
            ).one()
    finally:
        await other.close()
    return row[0], loads_json(row[1])


async def _started(rt: Runtime, operator: KeyPair) -> str:
    await registry.deploy_workflow(rt, operator, COUNTER)
    started = await start_instance(rt, operator.public, PATH, {"items": ITEMS})
    assert started.record.data == BIG
    return started.record.id


async def test_a_row_another_node_moved_on_is_read_again_never_served_from_cache(
    admin_rt, operator, db_url, clock
):
    pid = await _started(admin_rt, operator)
    other = await Runtime.open(Settings(database_url=db_url), clock=clock,
                               node_key=generate_keypair())  # fmt: skip
    admin_rt.group_commit = True  # this node locks through the batch's prefetch
    cache = admin_rt.uow.data_cache
    try:
        assert (await _act(admin_rt, operator, pid, "tick")).record.data["n"] == 1
        assert (await _act(admin_rt, operator, pid, "tick")).record.data["n"] == 2
        hits = cache.hits
        assert hits >= 1  # the second tick took the data the first one committed
        # the other node moves the row on twice (its own cache learns the row too)
        assert (await _act(other, operator, pid, "tick")).record.data["n"] == 3
        assert (await _act(other, operator, pid, "note", {"note": "b"})).record.data["n"] == 3
        misses = cache.misses
        result = await _act(admin_rt, operator, pid, "tick")
        assert cache.misses == misses + 1  # the row's head_hash was not the cached one
        assert result.record.data == {**BIG, "n": 4, "note": "b"}
        # and back: the other node's cached row is now stale in its turn
        other_misses = other.uow.data_cache.misses
        result = await _act(other, operator, pid, "note", {"note": "c"})
        assert other.uow.data_cache.misses == other_misses + 1
        assert result.record.data == {**BIG, "n": 4, "note": "c"}
        assert (await _act(admin_rt, operator, pid, "tick")).record.data["n"] == 5
    finally:
        await other.close()
    assert await _stored(db_url, pid) == (8, {**BIG, "n": 5, "note": "c"})
    report = await verify(admin_rt, pid)
    assert report.valid, [p.line() for p in report.problems]


async def test_an_action_that_mutates_data_stores_the_new_data_exactly(admin_rt, operator, db_url):
    pid = await _started(admin_rt, operator)
    admin_rt.group_commit = True
    expected: dict[str, Any] = {**BIG, "items": list(ITEMS)}
    for i in range(3):
        result = await _act(admin_rt, operator, pid, "add", {"item": {"id": 1000 + i}})
        expected["items"].append({"id": 1000 + i})
        assert result.record.data == expected
        result = await _act(admin_rt, operator, pid, "note", {"note": f"é{i}\u2028"})
        expected["note"] = f"é{i}\u2028"
        assert result.record.data == expected
        assert await _stored(db_url, pid) == (result.record.seq, expected)
    # The `note` updates kept `items` (the same list object): its text was reused
    # (`jsonparts.FragmentMemo`), and the stored data above is still exact.
    assert admin_rt.uow.data_cache.parts.reused >= 3
    async with admin_rt.uow(readonly=True) as uow:
        assert (await uow.processes.get(pid)).data == expected  # type: ignore[union-attr]
    assert (await verify(admin_rt, pid)).valid


#: A trigger counting the UPDATEs of `process_data` rows (the statements the database
#: runs, whatever path sent them), per dialect.
_COUNT_DATA_WRITES = {
    "sqlite": [
        "CREATE TABLE data_writes (n INTEGER NOT NULL)",
        "INSERT INTO data_writes VALUES (0)",
        "CREATE TRIGGER count_data_writes AFTER UPDATE ON process_data "
        "BEGIN UPDATE data_writes SET n = n + 1; END",
    ],
    "postgresql": [
        "CREATE TABLE data_writes (n INTEGER NOT NULL)",
        "INSERT INTO data_writes VALUES (0)",
        "CREATE FUNCTION count_data_writes() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN UPDATE data_writes SET n = n + 1; RETURN NEW; END $$",
        "CREATE TRIGGER count_data_writes AFTER UPDATE ON process_data "
        "FOR EACH ROW EXECUTE FUNCTION count_data_writes()",
    ],
}


async def _data_writes(rt: Runtime, *, install: bool = False) -> int:
    """UPDATEs of `process_data` rows since the counter was installed."""
    async with rt.uow() as uow:
        if install:
            for sql in _COUNT_DATA_WRITES[uow.session.bind.dialect.name]:
                await uow.session.execute(text(sql))
        n = int((await uow.session.execute(text("SELECT n FROM data_writes"))).scalar_one())
        await uow.commit()
    return n


@pytest.mark.parametrize("group", [False, True], ids=["single", "group-commit"])
async def test_an_event_that_leaves_the_data_alone_keeps_it(admin_rt, operator, db_url, group):
    pid = await _started(admin_rt, operator)
    admin_rt.group_commit = group
    await _act(admin_rt, operator, pid, "tick")
    writes = await _data_writes(admin_rt, install=True)
    for _ in range(2):  # the second touch: the data as this runtime's cache holds it
        result = await _act(admin_rt, operator, pid, "touch")
        assert result.record.data == {**BIG, "n": 1}
    # the data row is not written at all (its own table: docs/decisions.md)
    assert await _data_writes(admin_rt) == writes
    assert await _stored(db_url, pid) == (4, {**BIG, "n": 1})
    await _act(admin_rt, operator, pid, "tick")  # and a change after it is written
    assert await _data_writes(admin_rt) == writes + 1
    assert await _stored(db_url, pid) == (5, {**BIG, "n": 2})
    assert (await verify(admin_rt, pid)).valid


async def test_a_rolled_back_write_never_enters_the_cache(admin_rt, operator, db_url):
    pid = await _started(admin_rt, operator)
    factory: UnitOfWorkFactory = admin_rt.uow
    async with factory() as uow:
        record = (await uow.processes.lock([pid]))[pid]
        moved = replace(record, seq=record.seq + 1, head_hash="f" * 64, data={"lost": True})
        await uow.processes.update(moved, expected_seq=record.seq)
        await uow.rollback()
    assert all(data != {"lost": True} for data, _ in factory.data_cache.known([pid]).values())
    async with factory() as uow:
        again = (await uow.processes.lock([pid]))[pid]
    assert (again.seq, again.data, again.head_hash) == (record.seq, BIG, record.head_hash)
    assert await _stored(db_url, pid) == (record.seq, BIG)


async def test_small_edits_keep_a_large_rows_stored_length_on_sqlite(
    admin_rt, operator, db_url, db_kind
):
    if db_kind != "sqlite":
        pytest.skip("padding is SQLite's: jsonb keeps no whitespace to pad with")
    pid = await _started(admin_rt, operator)
    admin_rt.group_commit = True

    async def column() -> tuple[int, Any, int]:
        async with admin_rt.uow(readonly=True) as uow:
            row = await uow.session.execute(
                text(
                    "SELECT length(data), json_extract(data, '$.note'), "
                    "(SELECT count(*) FROM json_each(data, '$.items')) FROM process_data "
                    "WHERE process_id = :id"
                ),
                {"id": pid},
            )
            return tuple(row.one())  # type: ignore[return-value]

    length, _, count = await column()
    assert count == len(ITEMS)
    expected: dict[str, Any] = dict(BIG)
    for note in ("a", "a much longer note", "", "é ünïcode", "b" * 40):
        result = await _act(admin_rt, operator, pid, "note", {"note": note})
        expected["note"] = note
        assert result.record.data == expected
        assert await column() == (length, note, len(ITEMS))  # written in place
        assert await _stored(db_url, pid) == (result.record.seq, expected)
    # Growing past the spare space stores a longer row; the data still reads exactly.
    result = await _act(admin_rt, operator, pid, "note", {"note": "c" * 4000})
    expected["note"] = "c" * 4000
    grown, note, _ = await column()
    assert grown > length and note == "c" * 4000
    assert await _stored(db_url, pid) == (result.record.seq, expected)
    async with admin_rt.uow(readonly=True) as uow:
        assert (await uow.processes.get(pid)).data == expected  # type: ignore[union-attr]
    # The search's SQL (SQLite's JSON functions) reads the padded text as the data:
    for condition in (
        DataCondition.of("note", "EQ", "c" * 4000, "/0"),
        DataCondition.of("note", "GT", "b", "/1"),
        DataCondition.of("items", "EXISTS", True, "/2"),
    ):
        page = await search_instances(
            admin_rt, InstanceSearch(workflow=PATH, data=(condition,)), namespaces=None
        )
        assert [r.id for r in page.rows] == [pid], condition
    assert (await verify(admin_rt, pid)).valid


async def test_a_lock_that_waited_for_another_writer_reads_the_data_it_committed(
    admin_rt, operator, db_url, db_kind, clock
):
    """PostgreSQL: a `FOR UPDATE` that waits re-reads the newest process row; the data is
    read after the lock (a second statement, a new snapshot), so it is the data committed
    with that row, never the data of the snapshot before it."""
    if db_kind != "postgres":
        pytest.skip("SQLite has one writer at a time: no lock to wait for inside a read")
    pid = await _started(admin_rt, operator)
    other = await Runtime.open(Settings(database_url=db_url), clock=clock,
                               node_key=generate_keypair())  # fmt: skip
    try:
        async with other.uow() as uow:  # the other node learns the row as it is now
            await uow.processes.lock([pid])
        async with admin_rt.uow() as writer:
            record = (await writer.processes.lock([pid]))[pid]
            moved = replace(record, seq=record.seq + 1, head_hash="e" * 64, data={"new": 1})
            await writer.processes.update(moved, expected_seq=record.seq)
            async with other.uow() as reader:
                waiting = asyncio.create_task(reader.processes.lock([pid]))
                await asyncio.sleep(0.3)
                assert not waiting.done()  # blocked on the writer's row lock
                await writer.commit()
                seen = (await waiting)[pid]
        assert (seen.seq, seen.head_hash, seen.data) == (record.seq + 1, "e" * 64, {"new": 1})
    finally:
        await other.close()
