"""Migrations 0017 and 0019: PostgreSQL compresses new values of instance data with lz4;
the data moves from `processes.data` into `process_data` (0019) and back on downgrade,
every instance's value carried over unchanged, and the values written before either
(pglz) stay readable. SQLite: the same moves, no compression setting (issue 18)."""

from __future__ import annotations

from sqlalchemy import text

from stateward.governance.keys import generate_keypair
from stateward.persistence import create_engine, init_schema
from stateward.persistence.db import current_revision, downgrade_schema, loads_json
from stateward.runtime.access import registry
from stateward.runtime.access.genesis import init
from stateward.runtime.core.act import act
from stateward.runtime.core.commands import sign_as, start_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.verify import verify
from stateward.settings import Settings
from tests.counter_workflow import counter_workflow

PATH = "mig/lz4/counter"
COUNTER = counter_workflow(PATH)
ITEMS = [{"id": i, "name": f"item-{i}", "note": "n" * 48} for i in range(800)]
#: The data column's compression method ('' = the server default, 'l' = lz4, 'p' = pglz),
#: in `processes` before 0019 and in `process_data` from it on.
_METHOD = (
    "SELECT CAST(attcompression AS TEXT) FROM pg_attribute "
    "WHERE attrelid = '{table}'::regclass AND attname = 'data'"
)
_VALUES = {
    "processes": text("SELECT id, CAST(data AS TEXT) FROM processes ORDER BY id"),
    "process_data": text(
        "SELECT process_id, CAST(data AS TEXT) FROM process_data ORDER BY process_id"
    ),
}
OLD, NEW = "processes", "process_data"


async def _values(url: str, table: str) -> dict[str, object]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(_VALUES[table])).all()
            return {pid: loads_json(t) for pid, t in rows}
    finally:
        await engine.dispose()


async def _method(url: str, table: str) -> str | None:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            if conn.dialect.name != "postgresql":
                return None
            return str((await conn.execute(text(_METHOD.format(table=table)))).scalar_one())
    finally:
        await engine.dispose()


async def _downgrade(url: str, revision: str) -> None:
    engine = create_engine(url)
    try:
        await downgrade_schema(engine, revision)
    finally:
        await engine.dispose()


async def _upgrade(url: str) -> None:
    engine = create_engine(url)
    try:
        await init_schema(engine)
        assert await current_revision(engine) == "0021"
    finally:
        await engine.dispose()


async def test_instance_data_is_carried_over_and_new_values_use_lz4(db_url):
    operator = generate_keypair()
    rt = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    try:
        await init(rt, operator)
        await registry.deploy_workflow(rt, operator, COUNTER)
        pid = (await start_instance(rt, operator.public, PATH, {"items": ITEMS})).record.id
        await act(rt, sign_as(rt, operator, pid, "tick", PATH, {}), attested=False)
    finally:
        await rt.close()
    before = await _values(db_url, NEW)
    assert before[pid] == {"items": ITEMS, "state": "open", "n": 1}
    assert len(before) > 1  # the registry's data too

    await _downgrade(db_url, "0016")  # a database as it was before both migrations
    assert await _values(db_url, OLD) == before  # back in processes.data
    assert await _method(db_url, OLD) in (None, "")  # PostgreSQL: the default (pglz)

    await _upgrade(db_url)  # 0016 -> head
    assert await _values(db_url, NEW) == before  # every value carried over
    assert await _method(db_url, NEW) in (None, "l")  # lz4 where the server has it

    rt = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    try:
        await act(rt, sign_as(rt, operator, pid, "tick", PATH, {}), attested=False)
        async with rt.uow(readonly=True) as uow:
            assert (await uow.processes.get(pid)).data == {**before[pid], "n": 2}  # type: ignore[union-attr]
            if uow.session.bind.dialect.name == "postgresql" and (
                await _method(db_url, NEW) == "l"
            ):
                used = await uow.session.execute(
                    text(
                        "SELECT pg_column_compression(data) FROM process_data "
                        "WHERE process_id = :id"
                    ),
                    {"id": pid},
                )
                assert used.scalar_one() == "lz4"  # the value the tick wrote
        assert (await verify(rt, pid)).valid
    finally:
        await rt.close()

    await _downgrade(db_url, "0018")
    assert (await _values(db_url, OLD))[pid] == {**before[pid], "n": 2}
    assert await _method(db_url, OLD) in (None, "l")  # 0017's setting kept
    await _downgrade(db_url, "0016")
    assert await _method(db_url, OLD) in (None, "")
    assert (await _values(db_url, OLD))[pid] == {**before[pid], "n": 2}
