"""Workflow versions keep and hash their authored state/action order: the deploying event
signs the order, verify checks every stored version against its hash and its event, an
unchanged update is a no-op, and a restore rebuilds the authored order."""

from __future__ import annotations

import json

from sqlalchemy import text

from stateward.domain.canonical import canonical_hash
from stateward.domain.versionhash import ordered_hash
from stateward.runtime.access import registry
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.logfile import export_lines, parse_lines
from stateward.runtime.insight.logverify import verify_log
from stateward.runtime.insight.verify import verify

FLOW = {
    "$version": "2.0",
    "$path": "ord/flow",
    "initial": "start",
    "states": {
        "start": {"label": "Start"},
        "zeta": {"label": "Zeta", "terminal": True},
        "alpha": {"label": "Alpha", "terminal": True},
    },
    "actions": {"to_zeta": {"from": "start", "to": "zeta"},
                "to_alpha": {"from": "start", "to": "alpha"}},
}  # fmt: skip


async def _versions(rt: Runtime, path: str) -> list[tuple[int, str, str, int]]:
    async with rt.uow(readonly=True) as uow:
        rows = await uow.workflows.versions(path)
    return [(v.version, v.hash, v.definition, v.hash_scheme) for v in rows]


def _mismatches(report) -> list[str]:  # type: ignore[no-untyped-def]
    return [p.message for p in report.problems if p.code == "WORKFLOW_MISMATCH"]


async def test_a_version_keeps_its_order_which_the_event_signs_and_the_hash_covers(
    admin_rt, operator
):
    result = await registry.deploy_workflow(admin_rt, operator, FLOW)
    assert result.event.input["order"] == {
        "states": ["start", "zeta", "alpha"], "actions": ["to_zeta", "to_alpha"]
    }  # fmt: skip
    [(version, digest, stored, scheme)] = await _versions(admin_rt, FLOW["$path"])
    assert (version, scheme) == (1, 2)
    assert list(json.loads(stored)["states"]) == ["start", "zeta", "alpha"]
    assert digest == ordered_hash(FLOW) != canonical_hash(FLOW)
    assert (await verify(admin_rt)).valid


async def test_an_unchanged_update_is_a_no_op_and_a_reordered_one_is_a_new_version(
    admin_rt, operator
):
    await registry.deploy_workflow(admin_rt, operator, FLOW)
    same = await registry.unchanged_latest(admin_rt, operator.public, json.loads(json.dumps(FLOW)))
    assert same is not None and same.version == 1
    reordered = {**FLOW, "states": dict(reversed(list(FLOW["states"].items())))}
    assert await registry.unchanged_latest(admin_rt, operator.public, reordered) is None
    await registry.update_workflow(admin_rt, operator, reordered)
    versions = await _versions(admin_rt, FLOW["$path"])
    assert [v[0] for v in versions] == [1, 2] and versions[0][1] != versions[1][1]
    assert (await verify(admin_rt)).valid


async def test_reordering_a_stored_versions_states_is_caught_even_with_a_fixed_hash(
    admin_rt, operator
):
    await registry.deploy_workflow(admin_rt, operator, FLOW)
    reordered = {**FLOW, "states": dict(reversed(list(FLOW["states"].items())))}
    body = json.dumps(reordered, separators=(",", ":"))
    async with admin_rt.uow() as uow:
        await uow.session.execute(
            text("UPDATE workflow_versions SET definition = :d WHERE path = :p"),
            {"d": body, "p": FLOW["$path"]},
        )
        await uow.commit()
    admin_rt.definitions.limit = 0  # nothing cached
    assert any("differs from its hash" in m for m in _mismatches(await verify(admin_rt)))
    async with admin_rt.uow() as uow:  # the attacker re-hashes too: the event still says
        await uow.session.execute(
            text("UPDATE workflow_versions SET hash = :h WHERE path = :p"),
            {"h": ordered_hash(reordered), "p": FLOW["$path"]},
        )
        await uow.commit()
    messages = _mismatches(await verify(admin_rt))
    assert any("order differs from the order its event signed" in m for m in messages), messages


async def test_a_version_deployed_without_order_is_a_legacy_version_that_verifies(
    admin_rt, operator
):
    """An event without `order` (as every event before migration 0005) makes a scheme-1
    version: hashed over the sorted form, content checked against its event."""
    await registry.governance(admin_rt, operator, "ord", "add_workflow", {"definition": FLOW})
    [(_v, digest, _text, scheme)] = await _versions(admin_rt, FLOW["$path"])
    assert (digest, scheme) == (canonical_hash(FLOW), 1)
    assert (await verify(admin_rt)).valid
    # an unchanged update is a no-op against a legacy version too
    assert await registry.unchanged_latest(admin_rt, operator.public, FLOW) is not None
    async with admin_rt.uow() as uow:
        edited = {**FLOW, "initial": "zeta"}
        await uow.session.execute(
            text("UPDATE workflow_versions SET definition = :d, hash = :h WHERE path = :p"),
            {"d": json.dumps(edited), "h": canonical_hash(edited), "p": FLOW["$path"]},
        )
        await uow.commit()
    messages = _mismatches(await verify(admin_rt))
    assert any("differs from the definition its event signed" in m for m in messages)


async def test_a_restore_keeps_the_authored_order(admin_rt, operator, tmp_path):
    from stateward.persistence.db import create_engine, init_schema  # noqa: F401
    from stateward.runtime.insight.restore import restore
    from stateward.settings import Settings

    await registry.deploy_workflow(admin_rt, operator, FLOW)
    log = parse_lines([json.dumps(x) async for x in export_lines(admin_rt)])
    assert verify_log(log, workers=1).valid
    target = f"sqlite+aiosqlite:///{tmp_path / 'restored.db'}"
    await restore(Settings(database_url=target), log)
    rt = await Runtime.open(Settings(database_url=target), register_node=False)
    try:
        [(_v, digest, stored, scheme)] = await _versions(rt, FLOW["$path"])
        assert list(json.loads(stored)["states"]) == ["start", "zeta", "alpha"]
        assert (digest, scheme) == (ordered_hash(FLOW), 2)
        assert (await verify(rt)).valid
    finally:
        await rt.close()
