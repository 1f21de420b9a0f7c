"""The process-wide definition cache holds committed versions only: a version read by the
transaction that stored it stays with that transaction, so a deploy that rolled back
cannot leave its content behind under a version number that is later stored again with
other content (two nodes racing to deploy one path on PostgreSQL)."""

from __future__ import annotations

import json

from stateward.domain.versionhash import ordered_hash
from stateward.runtime.core.services import Runtime


def _flow(label: str) -> dict:  # type: ignore[type-arg]
    return {
        "$version": "2.0",
        "$path": "cache/flow",
        "initial": "start",
        "states": {"start": {"label": label}, "done": {"label": "Done", "terminal": True}},
        "actions": {"finish": {"from": "start", "to": "done"}},
    }


async def _store(rt: Runtime, flow: dict, *, commit: bool) -> str:  # type: ignore[type-arg]
    """Store `flow` as the next version and read it back in the same transaction; the
    label the engine would have used."""
    async with rt.uow() as uow:
        await uow.workflows.add_version(
            flow["$path"], json.dumps(flow), ordered_hash(flow), rt.clock.now()
        )
        first = await rt.definition(uow, flow["$path"], 1)
        again = await rt.definition(uow, flow["$path"])  # the latest: the same version
        assert again is first  # loaded once per transaction
        label = first.states["start"].label
        if commit:
            await uow.commit()
    return label


async def test_a_version_read_by_a_transaction_that_rolls_back_is_not_remembered(
    admin_rt: Runtime,
) -> None:
    assert await _store(admin_rt, _flow("Lost"), commit=False) == "Lost"
    assert admin_rt.definitions.get("cache/flow", 1) is None
    assert await _store(admin_rt, _flow("Kept"), commit=True) == "Kept"
    async with admin_rt.uow() as uow:  # a later write reads the committed content
        assert (await admin_rt.definition(uow, "cache/flow", 1)).states["start"].label == "Kept"
        assert (await admin_rt.definition(uow, "cache/flow")).states["start"].label == "Kept"
    cached = admin_rt.definitions.get("cache/flow", 1)
    assert cached is not None and cached.states["start"].label == "Kept"
