"""Large instance data is not rewritten page by page at every event (issue 18).

SQLite overwrites a row in place, writing only the pages whose bytes changed, unless the
UPDATE must delete and reinsert the row; it must when the statement sets a column of a
foreign key to the same table (`processes.parent_id`). The process UPDATE leaves
`parent_id` alone (a process's parent is fixed when it starts), so a `tick` on an
instance holding 64 KB writes about as many WAL pages as on one holding 1 KB — and the
stored row still equals the engine's data, the parent link stays. SQLite only: the WAL
file is what is measured (PostgreSQL writes a new tuple at every UPDATE anyway)."""

from __future__ import annotations

import os
import sqlite3
import uuid
from typing import Any

from sqlalchemy.engine import make_url

from stateward.domain.transition import START
from stateward.governance.envelope import SYSTEM_ACTOR
from stateward.governance.keys import KeyPair, generate_keypair
from stateward.persistence.db import loads_json
from stateward.runtime.access import registry
from stateward.runtime.access.genesis import init
from stateward.runtime.core.act import act
from stateward.runtime.core.commands import attest, sign_as, start_instance
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings
from tests.counter_workflow import counter_workflow

PATH = "tests/large/counter"
COUNTER = counter_workflow(PATH)
#: WAL frame = 24-byte header + one page (SQLite's default page size).
FRAME = 24 + 4096
TICKS = 12


def _items(size: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"item-{i}", "note": "n" * 48} for i in range(size // 80)]


async def _frames_per_tick(rt: Runtime, key: KeyPair, path: str, pid: str) -> float:
    """WAL frames one `tick` of `pid` appends (the WAL truncated first)."""
    await act(rt, sign_as(rt, key, pid, "tick", PATH, {}), attested=False)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    before = os.path.getsize(path + "-wal")
    for _ in range(TICKS):
        await act(rt, sign_as(rt, key, pid, "tick", PATH, {}), attested=False)
    return (os.path.getsize(path + "-wal") - before) / FRAME / TICKS


async def test_a_tick_on_64_kb_of_data_writes_about_the_pages_of_one_on_1_kb(sqlite_db_url):
    path = make_url(sqlite_db_url).database
    assert path is not None
    operator = generate_keypair()
    rt = await Runtime.open(Settings(database_url=sqlite_db_url), node_key=generate_keypair())
    try:
        await init(rt, operator)
        await registry.deploy_workflow(rt, operator, COUNTER)
        small = (await start_instance(rt, operator.public, PATH, {"items": _items(1024)})).record
        big_items = _items(64 * 1024)
        start = {"data": {"items": big_items}, "parent": small.id}
        signed = attest(rt, SYSTEM_ACTOR, str(uuid.uuid4()), START, PATH, start)
        big = (await act(rt, signed, attested=True)).record
        assert big.parent_id == small.id
        small_frames = await _frames_per_tick(rt, operator, path, small.id)
        big_frames = await _frames_per_tick(rt, operator, path, big.id)
        # A rewritten 64 KB row is 16+ overflow pages more per event; in place, 0–2.
        assert big_frames - small_frames < 4, (small_frames, big_frames)
    finally:
        await rt.close()
    with sqlite3.connect(path) as conn:
        data, parent = conn.execute(
            "SELECT d.data, p.parent_id FROM processes p "
            "JOIN process_data d ON d.process_id = p.id WHERE p.id = ?",
            (big.id,),
        ).fetchone()
    assert parent == small.id
    assert loads_json(data) == {"items": big_items, "state": "open", "n": TICKS + 1}
