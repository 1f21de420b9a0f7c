"""The mixed team / public / system example (`examples/intake/public/claim.json`) runs end
to end: agent setup, the customer's form by entry token, the scoring hook (which reads the
start metadata), the review, the customer's confirmation — the visitor's view frozen on the
last public step whenever a team or system state has the instance."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.hooks import automation
from stateward.runtime.hooks.runner import HookRunner
from stateward.runtime.insight.verify import verify
from stateward.runtime.public.entry import advance_public, issue_entry_token, public_view

EXAMPLES = Path(__file__).parents[2] / "examples" / "intake" / "public"
IP = "198.51.100.4"


@pytest.fixture
async def runner() -> AsyncIterator[HookRunner]:
    async with HookRunner(workers=1) as hooks:
        yield hooks


async def test_the_claim_example_runs_end_to_end(admin_rt, operator, runner) -> None:
    rt, admin = admin_rt, operator.public
    source = (EXAMPLES / "claims.star").read_text()
    await registry.add_module(rt, operator, "intake/public", "claims", source)
    await registry.deploy_workflow(rt, operator, json.loads((EXAMPLES / "claim.json").read_text()))
    automation.install(rt, runner)
    pid = (
        await start_instance(rt, admin, "intake/public/claim", {}, metadata={"channel": "web"})
    ).record.id
    await perform_action(rt, admin, pid, "invite", {"fields": {"policy": "P-123"}})
    token = await issue_entry_token(rt, admin, pid)
    view = await public_view(rt, token, IP)
    assert (view.state.key, view.active, view.data) == ("customer_form", True, {"policy": "P-123"})
    view = await advance_public(
        rt, token, "submit", {"fields": {"what": "Broken window", "amount": 300}}, IP
    )
    assert (view.state.key, view.status) == ("customer_form", "processing")
    for _ in range(100):  # the hook runs after the commit, in the background
        async with rt.uow(readonly=True) as uow:
            record = await uow.processes.get(pid)
        assert record is not None
        if record.state != "scoring":
            break
        await asyncio.sleep(0.1)
    assert (record.state, record.data["risk"]) == ("fast_track", 0)
    frozen = await public_view(rt, token, IP)
    assert (frozen.state.key, frozen.status, frozen.data) == ("customer_form", "processing", {})
    await perform_action(rt, admin, pid, "offer", {"payout": 250})
    shown = await public_view(rt, token, IP)
    assert (shown.state.key, shown.active) == ("confirmation", True)
    assert shown.data == {"what": "Broken window", "payout": 250}
    done = await advance_public(rt, token, "confirm", {"fields": {"accept": True}}, IP)
    assert (done.state.key, done.status) == ("confirmation", "completed")
    assert (await verify(rt, pid)).valid
