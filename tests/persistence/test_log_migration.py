"""Databases made before the deployment log migrate: their events are appended to the
log in `events.id` order, giving the same tree a fresh database built."""

from __future__ import annotations

from alembic.script import ScriptDirectory

from stateward.governance.keys import generate_keypair
from stateward.persistence import create_engine, init_schema
from stateward.persistence.db import alembic_config, current_revision, downgrade_schema
from stateward.runtime.access import registry
from stateward.runtime.access.genesis import init
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings

FLOW = {
    "$version": "2.0",
    "$path": "mig/log/flow",
    "initial": "a",
    "states": {"a": {"label": "A"}, "b": {"label": "B", "terminal": True}},
    "actions": {"go": {"from": "a", "to": "b"}},
}


async def _log(rt: Runtime) -> tuple[tuple[int, str], list[tuple[int, int | None]]]:
    async with rt.uow(readonly=True) as uow:
        head = await uow.log.head()
        rows = await uow.log.events(limit=10000)
    return head, [(i, e.id) for i, e in rows]


async def test_an_old_database_gets_its_events_logged_in_id_order(db_url):
    operator = generate_keypair()
    rt = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    try:
        await init(rt, operator)
        await registry.deploy_workflow(rt, operator, FLOW)
        await registry.grant_role(rt, operator, "mig/log", generate_keypair().public, ["x"])
        before = await _log(rt)
    finally:
        await rt.close()
    engine = create_engine(db_url)
    try:
        await downgrade_schema(engine, "0002")
        assert await current_revision(engine) == "0002"
        await init_schema(engine)
        assert (
            await current_revision(engine)
            == ScriptDirectory.from_config(alembic_config()).get_current_head()
        )
    finally:
        await engine.dispose()
    rt = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    try:
        after = await _log(rt)
    finally:
        await rt.close()
    assert before[0][0] == 4  # genesis, trust_node, add_workflow, grant_role
    assert after == before


async def test_the_unsigned_trusted_signers_row_becomes_legacy_trust_and_still_verifies(db_url):
    """A database whose node key was trusted by the old `meta.trusted_signers` row (no
    `trust_node` event) migrates: the row becomes `legacy_trusted_nodes`, verify (db and
    offline) still passes, and a `distrust_node` withdraws the legacy trust."""
    import json

    from sqlalchemy import text

    from stateward.runtime.core.commands import start_instance
    from stateward.runtime.insight.logfile import export_lines, parse_lines
    from stateward.runtime.insight.logverify import verify_database, verify_log

    operator, node = generate_keypair(), generate_keypair()
    rt = await Runtime.open(Settings(database_url=db_url), node_key=node)
    try:
        await init(rt, operator.public)  # the old way: nothing trusts the node key
        # attested, and as the old code signed it (no `order`: a scheme-1 version)
        await registry.governance(
            rt, operator.public, "mig/log", "add_workflow", {"definition": FLOW}
        )
        assert not (await verify_database(rt)).valid
    finally:
        await rt.close()
    engine = create_engine(db_url)
    try:
        await downgrade_schema(engine, "0008")
        async with engine.begin() as conn:
            await conn.execute(
                text("INSERT INTO meta (key, value) VALUES ('trusted_signers', :v)"),
                {"v": json.dumps([node.public])},
            )
        await init_schema(engine)
        assert (
            await current_revision(engine)
            == ScriptDirectory.from_config(alembic_config()).get_current_head()
        )
    finally:
        await engine.dispose()
    rt = await Runtime.open(Settings(database_url=db_url), node_key=node)
    try:
        assert await rt.node_trusted()
        assert (await verify_database(rt)).valid
        lines = [x async for x in export_lines(rt)]
        assert lines[0]["legacy_nodes"] == [node.public]
        assert verify_log(parse_lines(json.dumps(x) for x in lines), workers=1).valid
        await registry.distrust_node(rt, operator, node.public)
        assert not await rt.node_trusted()
        late = (await start_instance(rt, operator.public, FLOW["$path"], {})).record.id
        report = await verify_database(rt)
        assert {(p.process, p.code) for p in report.problems} == {(late, "BAD_SIGNATURE")}
    finally:
        await rt.close()


async def test_versions_of_an_older_database_keep_their_hash_as_scheme_1_and_verify(db_url):
    """A database made before the order-keeping hash (versions hashed over the sorted
    RFC 8785 form, deployed by events without `order`) migrates (0010): every version
    gets `hash_scheme = 1`, keeps its hash, and verify still passes."""
    from stateward.domain.canonical import canonical_hash
    from stateward.runtime.insight.logverify import verify_database

    operator = generate_keypair()
    rt = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    try:
        await init(rt, operator)
        # what today's code wrote: no `order` in the signed input
        await registry.governance(rt, operator, "mig/log", "add_workflow", {"definition": FLOW})
    finally:
        await rt.close()
    engine = create_engine(db_url)
    try:
        await downgrade_schema(engine, "0009")
        await init_schema(engine)
    finally:
        await engine.dispose()
    rt = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    try:
        async with rt.uow(readonly=True) as uow:
            [version] = await uow.workflows.versions(FLOW["$path"])
        assert (version.hash_scheme, version.hash) == (1, canonical_hash(FLOW))
        report = await verify_database(rt)
        assert report.valid, [p.line() for p in report.problems]
    finally:
        await rt.close()


async def _proofs(rt: Runtime) -> tuple[tuple[int, str], list[object], list[object]]:
    """The head, every event's inclusion proof in the current tree and in the tree of 3
    leaves, and the consistency proofs from every smaller tree to the current one."""
    from stateward.runtime.insight.proofs import consistency_proof, event_proof

    async with rt.uow(readonly=True) as uow:
        head = await uow.log.head()
        rows = await uow.log.events(limit=10000)
    inclusion = [await event_proof(rt, e.process_id, e.seq) for _i, e in rows]
    inclusion += [await event_proof(rt, e.process_id, e.seq, 3) for i, e in rows if i < 3]
    consistency = [await consistency_proof(rt, m) for m in range(head[0] + 1)]
    return head, inclusion, consistency


async def test_log_nodes_in_the_old_form_migrate_to_the_compact_table(db_url):
    """A database whose `log_nodes` is the old rowid table (hex hashes, unique and
    foreign-keyed `event_id`; before 0016) upgrades: the nodes carry over as 32-byte
    hashes, `verify` against a checkpoint signed before is clean, every proof is the
    same, and appending goes on from the carried-over head."""
    from sqlalchemy import text

    from stateward.governance.checkpoint import parse_checkpoint
    from stateward.runtime.core.commands import start_instance
    from stateward.runtime.insight.checkpoints import checkpoint
    from stateward.runtime.insight.logverify import verify_database

    operator, node = generate_keypair(), generate_keypair()
    rt = await Runtime.open(Settings(database_url=db_url), node_key=node)
    try:
        await init(rt, operator)
        await registry.deploy_workflow(rt, operator, FLOW)
        for _ in range(6):
            await start_instance(rt, operator.public, FLOW["$path"], {})
        cp = await checkpoint(rt)
        assert cp is not None
        before = await _proofs(rt)
    finally:
        await rt.close()
    engine = create_engine(db_url)
    try:
        await downgrade_schema(engine, "0015")
        async with engine.connect() as conn:
            old = (await conn.execute(text("SELECT hash, event_id FROM log_nodes"))).all()
        assert {len(h) for h, _e in old} == {64} and all(isinstance(h, str) for h, _e in old)
        size = before[0][0]  # every perfect subtree: 2n - popcount(n) nodes, n of them leaves
        assert len(old) == 2 * size - size.bit_count() and sum(e is not None for _h, e in old) == 9
        await init_schema(engine)
        assert await current_revision(engine) == "0021"
        async with engine.connect() as conn:
            new = (await conn.execute(text("SELECT hash FROM log_nodes"))).scalars().all()
        assert len(new) == len(old) and {len(bytes(h)) for h in new} == {32}
    finally:
        await engine.dispose()
    rt = await Runtime.open(Settings(database_url=db_url), node_key=node)
    try:
        assert await _proofs(rt) == before
        saved = parse_checkpoint(cp.as_json())
        report = await verify_database(rt, saved)
        assert report.valid, [p.line() for p in report.problems]
        await start_instance(rt, operator.public, FLOW["$path"], {})
        async with rt.uow(readonly=True) as uow:
            assert (await uow.log.head())[0] == before[0][0] + 1
            assert await uow.log.unlogged_events() == 0
        report = await verify_database(rt, saved)
        assert report.valid, [p.line() for p in report.problems]
    finally:
        await rt.close()
