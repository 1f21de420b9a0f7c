"""Migration 0017: PostgreSQL compresses new values of `processes.data` with lz4; values
written before (pglz) stay readable, and the data of every instance is carried over
unchanged by the upgrade and by the downgrade (issue 18). SQLite: the migration is a
no-op, the data the same."""

from __future__ import annotations

from alembic import command
from sqlalchemy import text

from stateward.governance.keys import generate_keypair
from stateward.persistence import create_engine, init_schema
from stateward.persistence.db import alembic_config, current_revision, loads_json
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
#: The column's compression method ('' = the server default, 'l' = lz4, 'p' = pglz).
_METHOD = text(
    "SELECT CAST(attcompression AS TEXT) FROM pg_attribute "
    "WHERE attrelid = 'processes'::regclass AND attname = 'data'"
)
_VALUES = text("SELECT id, CAST(data AS TEXT) FROM processes ORDER BY id")


async def _values(url: str) -> dict[str, object]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return {pid: loads_json(t) for pid, t in (await conn.execute(_VALUES)).all()}
    finally:
        await engine.dispose()


async def _method(url: str) -> str | None:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            if conn.dialect.name != "postgresql":
                return None
            return str((await conn.execute(_METHOD)).scalar_one())
    finally:
        await engine.dispose()


async def _downgrade(url: str, revision: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda c: command.downgrade(alembic_config(c), revision))
    finally:
        await engine.dispose()


async def test_instance_data_is_carried_over_and_new_values_use_lz4(db_url):
    operator = generate_keypair()
    await _downgrade(db_url, "0016")  # a database as it was before this migration
    assert await _method(db_url) in (None, "")  # PostgreSQL: the default (pglz)
    rt = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    try:
        await init(rt, operator)
        await registry.deploy_workflow(rt, operator, COUNTER)
        pid = (await start_instance(rt, operator.public, PATH, {"items": ITEMS})).record.id
        await act(rt, sign_as(rt, operator, pid, "tick", PATH, {}), attested=False)
    finally:
        await rt.close()
    before = await _values(db_url)
    assert before[pid] == {"items": ITEMS, "state": "open", "n": 1}

    engine = create_engine(db_url)
    try:
        await init_schema(engine)  # 0016 -> head
        assert await current_revision(engine) == "0018"
    finally:
        await engine.dispose()
    assert await _values(db_url) == before  # nothing rewritten, every value readable
    assert await _method(db_url) in (None, "l")  # lz4 where the server has it

    rt = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    try:
        await act(rt, sign_as(rt, operator, pid, "tick", PATH, {}), attested=False)
        async with rt.uow(readonly=True) as uow:
            assert (await uow.processes.get(pid)).data == {**before[pid], "n": 2}  # type: ignore[union-attr]
            if uow.session.bind.dialect.name == "postgresql" and await _method(db_url) == "l":
                used = await uow.session.execute(
                    text("SELECT pg_column_compression(data) FROM processes WHERE id = :id"),
                    {"id": pid},
                )
                assert used.scalar_one() == "lz4"  # the value the tick wrote
        assert (await verify(rt, pid)).valid
    finally:
        await rt.close()

    await _downgrade(db_url, "0016")
    assert await _method(db_url) in (None, "")
    assert (await _values(db_url))[pid] == {**before[pid], "n": 2}
