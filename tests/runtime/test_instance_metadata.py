"""Instance metadata (seed §3b): given at start, stored apart from the data, read by hooks,
never by routing, checked by `verify` against the `$start` event."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kernel_fixtures import Desk
from sqlalchemy import update

from stateward.persistence.models import Process
from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.hooks import automation
from stateward.runtime.hooks.runner import HookRunner
from stateward.runtime.insight.verify import verify

NS = "ops/meta"
ECHO = """
def echo(ctx):
    return {"channel": ctx["metadata"].get("channel", "none"), "has": "metadata" in ctx["data"]}
"""
FLOW: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{NS}/intake",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "enrich": {"label": "Enrich", "audience": "system", "hook": "meta:echo"},
        "web": {"label": "Web", "terminal": True},
        "other": {"label": "Other", "terminal": True},
    },
    "actions": {
        "submit": {"from": "intake", "to": "enrich"},
        # routing sees only the data: metadata.channel is not there
        "to_web": {"from": "enrich", "to": "web", "when": "channel = 'web'"},
        "to_other": {"from": "enrich", "to": "other"},
    },
}


@pytest.fixture
async def runner() -> AsyncIterator[HookRunner]:
    async with HookRunner(workers=1) as hooks:
        yield hooks


@pytest.fixture
async def desk(admin_rt, operator, runner) -> Desk:
    await registry.add_module(admin_rt, operator, NS, "meta", ECHO)
    await registry.deploy_workflow(admin_rt, operator, FLOW)
    automation.install(admin_rt, runner)
    return Desk(admin_rt, operator)


async def test_metadata_is_stored_apart_and_read_by_the_hook(desk: Desk) -> None:
    meta = {"channel": "web", "utm": {"source": "mail"}}
    started = await start_instance(desk.rt, desk.admin, FLOW["$path"], {"x": 1}, metadata=meta)
    pid = started.record.id
    assert started.record.instance_metadata == meta
    assert "metadata" not in started.record.data and started.record.data["x"] == 1
    await perform_action(desk.rt, desk.admin, pid, "submit", {})
    record = await desk.process(pid)
    assert (record.data["channel"], record.data["has"]) == ("web", False)
    assert record.state == "web" and record.instance_metadata == meta
    async with desk.rt.uow(readonly=True) as uow:
        first = (await uow.events.for_process(pid))[0]
    assert first.input == {"data": {"x": 1}, "metadata": meta}
    assert (await verify(desk.rt, pid)).valid


async def test_without_metadata_nothing_changes(desk: Desk) -> None:
    started = await start_instance(desk.rt, desk.admin, FLOW["$path"], {})
    assert started.record.instance_metadata is None
    async with desk.rt.uow(readonly=True) as uow:
        first = (await uow.events.for_process(started.record.id))[0]
    assert first.input == {"data": {}}  # the $start input of before: same hashes
    await perform_action(desk.rt, desk.admin, started.record.id, "submit", {})
    assert (await desk.process(started.record.id)).state == "other"


async def test_verify_reports_edited_metadata(desk: Desk) -> None:
    pid = (
        await start_instance(desk.rt, desk.admin, FLOW["$path"], {}, metadata={"a": 1})
    ).record.id
    async with desk.rt.uow() as uow:
        await uow.session.execute(
            update(Process).where(Process.id == pid).values(instance_metadata={"a": 2})
        )
        await uow.commit()
    report = await verify(desk.rt, pid)
    assert not report.valid
    assert "METADATA_MISMATCH" in {p.code for p in report.problems}
