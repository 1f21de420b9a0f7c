"""The Starlark `workflow` module (seed §10, issue 13) in the kernel runtime, with real
Starlark on SQLite and PostgreSQL.

A hook reads and writes its own instance and that instance's children, nothing else:
another tenant's instance, a sibling or an id that exists nowhere are all `HOOK_SCOPE`;
an `advance` loop and oversized writes are `HOOK_LIMIT`; advancing itself is `HOOK_CALL`.
What the hook read (ids and seqs) and did is recorded in its `$automate` event; its own
writes are merged by that event, each child's become one `$hook_write` system event; a
child that moves between the hook's read and the record makes the hook run again. The
database verify and the offline verify replay all of it without running Starlark.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kernel_fixtures import Desk

from stateward.domain.errors import DomainError
from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.ops_support import system_act
from stateward.runtime.hooks import automation, calls
from stateward.runtime.hooks.module import HookModule, HookResult
from stateward.runtime.hooks.runner import HookRunner
from stateward.runtime.insight.logfile import export_lines, parse_lines
from stateward.runtime.insight.logverify import verify_database, verify_log

NS = "ops/fleet"
HOOKS = """
def dispatch(ctx):
    me = workflow.get_instance(ctx["instance_id"])
    n = 0
    for child in me["children"]:
        data = workflow.get_stage_data(child)
        workflow.set_stage_data(child, {"priority": len(data["item"]), "by": me["id"]})
        workflow.advance(child)
        n += 1
    workflow.set_stage_data(ctx["instance_id"], {"dispatched": n, "summary": "own write"})
    mine = workflow.get_stage_data(ctx["instance_id"])
    return {"summary": "result wins", "seen": mine["dispatched"],
            "queues": [len(workflow.get_assignments(c)) for c in me["children"]]}

def peek(ctx):
    return {"peeked": workflow.get_instance(ctx["data"]["target"])["data"]}

def spin(ctx):
    child = workflow.get_instance(ctx["instance_id"])["children"][0]
    for _ in range(1000):
        workflow.advance(child)
    return {}

def hoard(ctx):
    child = workflow.get_instance(ctx["instance_id"])["children"][0]
    workflow.set_stage_data(child, {"blob": "x" * 70000})
    return {}

def trickle(ctx):
    child = workflow.get_instance(ctx["instance_id"])["children"][0]
    for i in range(5):
        workflow.set_stage_data(child, {"part" + str(i): "y" * 60000})
    return {}

def selfish(ctx):
    workflow.advance(ctx["instance_id"])
    return {}

def climb(ctx):
    parent = workflow.get_instance(ctx["instance_id"])["parent_id"]
    workflow.advance(parent)
    return {}

def census(ctx):
    for task in ctx["data"]["tasks"]:
        workflow.get_stage_data(task)
    return {}

def meddle(ctx):
    workflow.set_stage_data(ctx["data"]["target"], {"owned": True})
    return {}
"""
TASK: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{NS}/task",
    "initial": "open",
    "start": {"spawn_only": True},
    "states": {
        "open": {"label": "Open", "assign": "analyst"},
        "review": {"label": "Review"},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "submit": {"from": "open", "to": "review"},
        "note": {"from": "open", "mutate": {"$set": {"note": "input.note"}}},
        "finish": {"from": "review", "to": "done"},
    },
}


def _batch(function: str) -> dict[str, Any]:
    """A parent that spawns one task per item, then runs `hooks:<function>` on entry."""
    return {
        "$version": "2.0",
        "$path": f"{NS}/{function}",
        "initial": "draft",
        "states": {
            "draft": {"label": "Draft"},
            "dispatch": {"label": "Dispatch", "audience": "system", "hook": f"hooks:{function}"},
            "running": {"label": "Running"},
            "closed": {"label": "Closed", "terminal": True},
        },
        "actions": {
            "begin": {
                "from": "draft",
                "to": "dispatch",
                "spawn": [
                    {
                        "workflow": TASK["$path"],
                        "each": {"$ref": "data.items"},
                        "as": "tasks",
                    }
                ],
            },
            "close": {"from": "running", "to": "closed"},
        },
    }


FUNCTIONS = ("dispatch", "peek", "spin", "hoard", "trickle", "selfish", "meddle", "census")


@pytest.fixture
async def runner() -> AsyncIterator[HookRunner]:
    async with HookRunner(workers=1, default_timeout_ms=5000) as hooks:
        yield hooks


@pytest.fixture
async def desk(admin_rt, operator, runner) -> Desk:
    desk = await Desk(admin_rt, operator).setup()
    await registry.add_module(admin_rt, operator, NS, "hooks", HOOKS)
    await registry.deploy_workflow(admin_rt, operator, TASK)
    for function in FUNCTIONS:
        await registry.deploy_workflow(admin_rt, operator, _batch(function))
    automation.install(admin_rt, runner)
    return desk


async def _begin(desk: Desk, function: str, **data: Any) -> tuple[str, list[str]]:
    data.setdefault("items", ["ab", "abcd"])
    pid = (await start_instance(desk.rt, desk.admin, f"{NS}/{function}", data)).record.id
    begun = await perform_action(desk.rt, desk.admin, pid, "begin", {})
    return pid, [c.id for c in begun.children]


async def _last(desk: Desk, pid: str) -> Any:
    async with desk.rt.uow(readonly=True) as uow:
        return (await uow.events.for_process(pid))[-1]


async def _replays(desk: Desk) -> None:
    """Both verifies: the database's, and the offline one over the exported log."""
    assert (await verify_database(desk.rt)).valid
    lines = [json.dumps(x) async for x in export_lines(desk.rt)]
    assert verify_log(parse_lines(lines), workers=1).valid


async def test_a_hook_writes_and_advances_its_children_recorded_and_replayed(desk):
    pid, children = await _begin(desk, "dispatch")
    parent = await desk.process(pid)
    assert (parent.state, parent.status) == ("running", "active")
    # Own writes merge first, the result wins on a shared key; the hook saw its own write.
    assert (parent.data["dispatched"], parent.data["summary"], parent.data["seen"]) == (
        2, "result wins", 2,
    )  # fmt: skip
    assert parent.data["queues"] == [1, 1]  # each child's open `analyst` assignment
    recorded = await _last(desk, pid)
    assert recorded.action == "$automate"
    record = recorded.input["workflow"]
    ordered = sorted(children)  # children come oldest first, then by id
    assert record["reads"] == [{"id": pid, "seq": 2}] + [{"id": c, "seq": 1} for c in ordered]
    assert record["advances"] == ordered
    assert [w["id"] for w in record["writes"]] == [*ordered, pid]  # in the hook's call order
    for child in children:
        row = await desk.process(child)
        assert (row.state, row.data["priority"], row.data["by"]) == (
            "review", len(row.data["item"]), pid,
        )  # fmt: skip
        assert await desk.actions(child) == ["$start", "$hook_write"]
        follow = await _last(desk, child)
        assert follow.actor == "system"
        assert (follow.input["by"], follow.input["at"], follow.input["after"]) == (pid, 3, 1)
        async with desk.rt.uow(readonly=True) as uow:  # the advance left the team state
            assert not await uow.assignments.open_for_process(child)
    await _replays(desk)


async def test_another_tenants_instance_a_sibling_and_an_unknown_id_are_out_of_scope(
    desk, operator
):
    await registry.deploy_workflow(desk.rt, operator, {**TASK, "$path": "other/tenant/task",
                                                       "start": {}})  # fmt: skip
    foreign = await start_instance(desk.rt, desk.admin, "other/tenant/task", {"secret": 1})
    sibling, _ = await _begin(desk, "dispatch")
    for target in (foreign.record.id, sibling, "no-such-instance"):
        for function in ("peek", "meddle"):
            pid, _ = await _begin(desk, function, target=target)
            row = await desk.process(pid)
            assert row.status == "error", (function, target)
            assert "peeked" not in row.data
            reason = (await _last(desk, pid)).input["error"]
            assert reason.startswith("HOOK_SCOPE: ")
            assert "secret" not in reason and "its own instance" in reason
    assert "owned" not in (await desk.process(foreign.record.id)).data
    assert "owned" not in (await desk.process(sibling)).data
    await _replays(desk)


@pytest.mark.parametrize(
    ("function", "code"),
    [("spin", "HOOK_LIMIT"), ("hoard", "HOOK_LIMIT"), ("trickle", "HOOK_LIMIT"),
     ("selfish", "HOOK_CALL")],
)  # fmt: skip
async def test_advance_loops_huge_writes_and_self_advance_are_refused(desk, function, code):
    pid, children = await _begin(desk, function)
    row = await desk.process(pid)
    recorded = await _last(desk, pid)
    assert (row.status, recorded.input["code"]) == ("error", code)
    assert "workflow" not in recorded.input  # a failed hook writes nothing
    for child in children:
        assert await desk.actions(child) == ["$start"]
        assert "blob" not in (await desk.process(child)).data
    await _replays(desk)


class _Interfering(HookRunner):
    """A real runner; after the first `times` runs, a user acts on the first child of
    the instance (so the hook's reads are stale when its event is recorded)."""

    def __init__(self, desk: Desk, times: int = 1) -> None:
        super().__init__(workers=1, default_timeout_ms=5000)
        self.desk = desk
        self.times = times
        self.runs = 0

    async def run(self, module: HookModule, function: str, ctx: dict[str, Any],
                  timeout_ms: int | None = None, world: dict[str, Any] | None = None,
                  ) -> HookResult:  # fmt: skip
        result = await super().run(module, function, ctx, timeout_ms, world)
        self.runs += 1
        if self.runs <= self.times and world is not None:
            child = world["instances"][ctx["instance_id"]]["children"][0]
            note = {"note": f"hi {self.runs}"}
            await perform_action(self.desk.rt, self.desk.admin, child, "note", note)
        return result


async def test_a_child_that_changes_after_the_read_makes_the_hook_run_again(desk):
    interfering = _Interfering(desk)
    desk.rt.automation.clear()
    automation.install(desk.rt, interfering)
    try:
        pid, children = await _begin(desk, "dispatch")
    finally:
        await interfering.close()
    assert interfering.runs == 2  # the first run's reads went stale: not recorded
    record = (await _last(desk, pid)).input["workflow"]
    assert {"id": sorted(children)[0], "seq": 2} in record["reads"]  # the second run read the note
    noted = sorted(children)[0]  # the world's first child
    first = await desk.process(noted)
    assert (first.state, first.data["note"]) == ("review", "hi 1")
    assert await desk.actions(noted) == ["$start", "note", "$hook_write"]
    assert await desk.actions(pid) == ["$start", "begin", "$automate"]
    await _replays(desk)


async def test_hook_write_is_system_only_for_the_parent_and_at_the_seq_read(desk):
    pid, children = await _begin(desk, "dispatch")
    other, _ = await _begin(desk, "dispatch")
    child = children[0]
    seq = (await desk.process(child)).seq
    stale = {"by": pid, "at": 3, "after": seq - 1, "data": {"late": True}}
    with pytest.raises(DomainError) as refused:
        await system_act(desk.rt, child, TASK["$path"], "$hook_write", stale)
    assert refused.value.details.get("reason") == "not_due"
    stranger = {"by": other, "at": 3, "after": seq, "data": {"late": True}}
    with pytest.raises(DomainError) as forbidden:
        await system_act(desk.rt, child, TASK["$path"], "$hook_write", stranger)
    assert forbidden.value.code == "FORBIDDEN"
    with pytest.raises(DomainError) as human:
        await perform_action(desk.rt, desk.admin, child, "$hook_write", {**stale, "after": seq})
    assert human.value.code in ("FORBIDDEN", "INVALID_INPUT")
    assert "late" not in (await desk.process(child)).data
    await _replays(desk)


async def test_children_that_keep_changing_end_in_hook_stale(desk):
    interfering = _Interfering(desk, times=3)
    desk.rt.automation.clear()
    automation.install(desk.rt, interfering)
    try:
        pid, children = await _begin(desk, "dispatch")
    finally:
        await interfering.close()
    assert interfering.runs == 3
    recorded = await _last(desk, pid)
    assert ((await desk.process(pid)).status, recorded.input["code"]) == ("error", "HOOK_STALE")
    for child in children:  # nothing written, nothing advanced
        assert (await desk.process(child)).state == "open"
    await _replays(desk)


async def test_a_child_that_moves_between_the_two_events_keeps_its_state(desk):
    pid, children = await _begin(desk, "dispatch")
    child = sorted(children)[0]
    seq = (await desk.process(child)).seq
    await perform_action(desk.rt, desk.admin, child, "finish", {})
    record = {"reads": [{"id": child, "seq": seq}], "writes": [{"id": child, "data": {"x": 1}}],
              "advances": [child]}  # fmt: skip
    assert await calls.follow_up(desk.rt, pid, 3, record) == [child]
    row = await desk.process(child)
    assert (row.state, "x" in row.data) == ("done", False)
    await _replays(desk)


async def test_a_child_beyond_what_a_hook_can_see_is_hook_limit(desk, monkeypatch):
    monkeypatch.setattr(calls, "MAX_CHILDREN", 1)
    pid, children = await _begin(desk, "census")
    recorded = await _last(desk, pid)
    assert recorded.input["code"] == "HOOK_LIMIT", recorded.input
    assert "beyond the first 200" in recorded.input["error"]
    async with desk.rt.uow(readonly=True) as uow:
        parent = await uow.processes.get(pid)
        assert parent is not None
        seen = await calls.world(uow, parent)
    assert seen["omitted"] == [sorted(children)[1]]
    assert list(seen["instances"]) == [pid, sorted(children)[0]]
    await _replays(desk)


CLIMBER: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{NS}/climber",
    "initial": "climbing",
    "start": {"spawn_only": True},
    "states": {
        "climbing": {"label": "Climbing", "audience": "system", "hook": "hooks:climb"},
        "open": {"label": "Open"},
    },
    "actions": {},
}
ROOT: dict[str, Any] = {
    "$version": "2.0",
    "$path": f"{NS}/root",
    "initial": "draft",
    "states": {"draft": {"label": "Draft"}, "waiting": {"label": "Waiting"}},
    "actions": {
        "begin": {"from": "draft", "to": "waiting", "spawn": [{"workflow": CLIMBER["$path"]}]},
        "go": {"from": "waiting", "to": "draft"},
    },
}


async def test_a_childs_hook_cannot_reach_up_to_its_parent(desk, operator):
    await registry.deploy_workflow(desk.rt, operator, CLIMBER)
    await registry.deploy_workflow(desk.rt, operator, ROOT)
    pid = (await start_instance(desk.rt, desk.admin, ROOT["$path"], {})).record.id
    begun = await perform_action(desk.rt, desk.admin, pid, "begin", {})
    child = begun.children[0].id
    assert (await desk.process(child)).status == "error"
    assert (await _last(desk, child)).input["code"] == "HOOK_SCOPE"
    assert (await desk.process(pid)).state == "waiting"  # the parent was not advanced
    await _replays(desk)


async def test_follow_ups_lost_in_a_crash_are_sent_by_the_recovery_sweep_once(desk, monkeypatch):
    async def crash(*args: Any) -> list[str]:  # the node dies right after `$automate`
        return []

    monkeypatch.setattr(calls, "follow_up", crash)
    pid, children = await _begin(desk, "dispatch")
    monkeypatch.undo()
    assert [await desk.actions(c) for c in children] == [["$start"]] * 2
    assert (await desk.process(pid)).state == "running"  # the parent's event stands
    grace = automation.recovery_grace(desk.rt.settings)
    await automation.recover(desk.rt, desk.rt.clock.now())  # within the grace: left alone
    assert [await desk.actions(c) for c in children] == [["$start"]] * 2
    desk.rt.clock.advance(grace + 1)
    await automation.recover(desk.rt, desk.rt.clock.now())
    for child in children:
        row = await desk.process(child)
        assert (row.state, row.data["by"]) == ("review", pid)
        assert await desk.actions(child) == ["$start", "$hook_write"]
    desk.rt.clock.advance(grace + 1)
    await automation.recover(desk.rt, desk.rt.clock.now())  # applied ones are not re-sent
    assert [await desk.actions(c) for c in children] == [["$start", "$hook_write"]] * 2
    await _replays(desk)
