"""The `workflow` module inside the hook worker (issue 13), without a database: a real
worker process answering `workflow.*` from the world it is sent, the record of the calls,
and every refusal with its stable code."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from stateward.runtime.hooks.runner import HookModule, HookRunner

SOURCE = """
def copy(ctx):
    data = workflow.get_stage_data("c1")
    data["mutated"] = True  # a copy: the world is not changed by this
    inst = workflow.get_instance("c1")
    return {"mutated": "mutated" in workflow.get_stage_data("c1"), "state": inst["state"]}

def write_read(ctx):
    workflow.set_stage_data("c1", {"a": 1})
    workflow.set_stage_data("c1", {"b": [1, 2]})
    workflow.set_stage_data("p", {"mine": True})
    return {"c1": workflow.get_stage_data("c1"), "queue": workflow.get_assignments("c1")}

def reads_only(ctx):
    return {"n": len(workflow.get_instance("p")["children"])}

def nothing(ctx):
    return {}

def not_a_dict(ctx):
    workflow.set_stage_data("c1", [1])
    return {}

def reserved(ctx):
    workflow.set_stage_data("c1", {"$action": "x"})
    return {}

def big_int(ctx):
    workflow.set_stage_data("c1", {"n": 2 * 9007199254740993})
    return {}

def finished(ctx):
    workflow.advance("c2")
    return {}

def odd_id(ctx):
    return workflow.get_instance(42)

def long_id(ctx):
    return workflow.get_instance("x" * 100000)
"""
WORLD: dict[str, Any] = {
    "self": "p",
    "instances": {
        "p": {"id": "p", "seq": 4, "state": "dispatch", "status": "active", "data": {},
              "children": ["c1", "c2"]},
        "c1": {"id": "c1", "seq": 1, "state": "open", "status": "active", "data": {"x": 1}},
        "c2": {"id": "c2", "seq": 7, "state": "done", "status": "completed", "data": {}},
    },
    "omitted": [],
    "assignments": {"c1": [{"id": "a1", "team": "analyst", "status": "unassigned"}]},
}  # fmt: skip
MODULE = HookModule("ops/t", "wf", SOURCE)


@pytest.fixture
async def runner() -> AsyncIterator[HookRunner]:
    async with HookRunner(workers=1, default_timeout_ms=5000) as hooks:
        yield hooks


async def test_reads_are_copies_and_writes_are_read_back_and_recorded(runner):
    copied = await runner.run(MODULE, "copy", {}, world=WORLD)
    assert copied.value == {"mutated": False, "state": "open"}
    assert copied.workflow == {"reads": [{"id": "c1", "seq": 1}], "writes": [], "advances": []}
    done = await runner.run(MODULE, "write_read", {}, world=WORLD)
    assert done.ok, done.error
    assert done.value is not None
    assert done.value["c1"] == {"x": 1, "a": 1, "b": [1, 2]}
    assert done.value["queue"] == WORLD["assignments"]["c1"]
    assert done.workflow == {
        "reads": [{"id": "c1", "seq": 1}, {"id": "p", "seq": 4}],
        "writes": [
            {"id": "c1", "data": {"a": 1, "b": [1, 2]}},
            {"id": "p", "data": {"mine": True}},
        ],
        "advances": [],
    }
    # The next call starts from the world it is sent: nothing of the last one remains.
    again = await runner.run(MODULE, "copy", {}, world=WORLD)
    assert again.value == {"mutated": False, "state": "open"}
    assert (await runner.run(MODULE, "nothing", {}, world=WORLD)).workflow is None
    assert (await runner.run(MODULE, "reads_only", {}, world=WORLD)).value == {"n": 2}


@pytest.mark.parametrize(
    ("function", "code", "words"),
    [
        ("not_a_dict", "HOOK_CALL", "data must be a dict"),
        ("reserved", "HOOK_CALL", "reserved key '$action'"),
        ("big_int", "HOOK_CALL", "beyond ±2^53"),
        ("finished", "HOOK_CALL", "c2 is completed"),
        ("odd_id", "HOOK_SCOPE", "its own instance"),
        ("long_id", "HOOK_SCOPE", "xxx...): a hook may only use"),
    ],
)
async def test_bad_calls_are_refused_with_their_code_and_the_hooks_line(
    runner, function, code, words
):
    result = await runner.run(MODULE, function, {}, world=WORLD)
    assert (result.ok, result.error_code) == (False, code)
    assert result.error is not None and words in result.error
    assert "(at wf.star:" in result.error and f"in {function})" in result.error


async def test_without_a_world_and_at_a_modules_top_level_nothing_is_reachable(runner):
    alone = await runner.run(MODULE, "reads_only", {})
    assert (alone.error_code, "only available inside a hook call" in (alone.error or "")) == (
        "HOOK_CALL", True,
    )  # fmt: skip
    eager = HookModule(
        "ops/t", "eager", 'X = workflow.get_instance("p")\ndef f(ctx):\n    return {}\n'
    )
    report = await runner.inspect(eager)
    assert not report.ok and "only available inside a hook call" in report.problems[0].message


async def test_a_huge_id_is_not_echoed_into_the_error(runner):
    result = await runner.run(MODULE, "long_id", {}, world=WORLD)
    assert result.error is not None and len(result.error) < 300
