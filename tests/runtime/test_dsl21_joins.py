"""DSL 2.1 parallel work in the runtime: multi-instance spawns, parent data flowing into
children, `returns` flowing back through `$child`, and an `await` join that completes the
parent exactly once — also when the children end concurrently on two nodes (two runtimes
on one database). Every log is replayed by `verify`. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from kernel_fixtures import Desk

from stateward.governance.keys import generate_keypair
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.verify import verify
from stateward.settings import Settings

ONBOARDING: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/onboarding",
    "initial": "draft",
    "states": {
        "draft": {"label": "Draft"},
        "parallel": {"label": "Teams at work", "await": {"children": "all", "then": "joined"}},
        "ready": {"label": "Ready", "terminal": True},
    },
    "actions": {
        "begin": {
            "from": "draft",
            "to": "parallel",
            "spawn": [
                {
                    "workflow": "ops/desk/team-task",
                    "each": {"$ref": "data.teams"},
                    "data": {"employee": {"$ref": "data.employee"}},
                    "as": "tasks",
                }
            ],
        },
        "joined": {
            "role": "system",
            "from": "parallel",
            "to": "ready",
            "mutate": {"$set": {"results": "input.children", "joined_at": "$timestamp"}},
        },
    },
}
TASK: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/team-task",
    "initial": "open",
    "start": {"spawn_only": True},
    "states": {
        "open": {"label": "Open"},
        "done": {"label": "Done", "terminal": True, "returns": ["note", "start_date"]},
    },
    "actions": {
        "finish": {
            "from": "open",
            "to": "done",
            "mutate": {
                "$set": {
                    "note": "input.note",
                    "start_date": {"$ref": "parent.start_date"},
                    "done_by": {"$ref": "actor.id"},
                }
            },
        },
        "drop": {"from": "open", "to": "$cancel"},
    },
}
TEAMS = ["hr", "it", "facilities"]


@pytest.fixture
async def desk(admin_rt, operator) -> Desk:
    return await Desk(admin_rt, operator).setup(TASK, ONBOARDING)


async def _begin(rt: Runtime, desk: Desk) -> tuple[str, list[str]]:
    data = {"employee": "eve", "teams": TEAMS, "start_date": "2027-01-04"}
    pid = (await start_instance(rt, desk.admin, ONBOARDING["$path"], data)).record.id
    begun = await perform_action(rt, desk.admin, pid, "begin", {})
    return pid, [c.id for c in begun.children]


async def _actions(desk: Desk, pid: str) -> list[str]:
    return await desk.actions(pid)


async def test_a_multi_instance_spawn_starts_one_child_per_element_with_parent_data(desk):
    pid, kids = await _begin(desk.rt, desk)
    assert len(kids) == 3
    children = [await desk.process(k) for k in kids]
    assert [(c.data["item"], c.data["index"], c.data["employee"]) for c in children] == [
        ("hr", 0, "eve"),
        ("it", 1, "eve"),
        ("facilities", 2, "eve"),
    ]
    assert {c.parent_id for c in children} == {pid}
    parent = await desk.process(pid)
    assert parent.data["tasks"] == kids
    assert {k: v["status"] for k, v in parent.data["$children"].items()} == dict.fromkeys(
        kids, "active"
    )


async def test_children_return_values_and_the_join_completes_the_parent(desk):
    pid, kids = await _begin(desk.rt, desk)
    for n, kid in enumerate(kids[:2]):
        await perform_action(desk.rt, desk.analysts[n], kid, "finish", {"note": f"n{n}"})
        assert (await desk.process(pid)).state == "parallel"
    await perform_action(desk.rt, desk.admin, kids[2], "drop", {"reason": "not needed"})
    parent = await desk.process(pid)
    assert (parent.state, parent.status) == ("ready", "completed")
    by_id = {r["id"]: r for r in parent.data["results"]}
    assert by_id[kids[0]]["result"] == {"note": "n0", "start_date": "2027-01-04"}
    assert by_id[kids[2]] == {
        "id": kids[2],
        "workflow": TASK["$path"],
        "status": "cancelled",
        "result": None,
    }
    first = await desk.process(kids[0])
    assert first.data["done_by"] == desk.analysts[0]
    assert Counter(await _actions(desk, pid)) == Counter({"$start": 1, "begin": 1, "$child": 3})
    for process_id in (pid, *kids):
        assert (await verify(desk.rt, process_id)).valid


async def test_three_children_ending_concurrently_complete_the_parent_exactly_once(desk):
    pid, kids = await _begin(desk.rt, desk)
    calls = [
        perform_action(desk.rt, desk.analysts[n], kid, "finish", {"note": str(n)})
        for n, kid in enumerate(kids)
    ]
    await asyncio.gather(*calls)
    await _assert_joined_once(desk, pid, kids)


async def test_children_ending_concurrently_on_two_nodes_join_exactly_once(desk, db_url):
    other = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    try:
        await other.refresh_trusted()
        await desk.rt.refresh_trusted()
        for _round in range(3):
            pid, kids = await _begin(desk.rt, desk)
            nodes = [desk.rt, other, other]
            calls = [
                perform_action(nodes[n], desk.analysts[n], kid, "finish", {"note": str(n)})
                for n, kid in enumerate(kids)
            ]
            await asyncio.gather(*calls)
            await desk.rt.refresh_trusted()
            await _assert_joined_once(desk, pid, kids)
    finally:
        await other.close()


async def _assert_joined_once(desk: Desk, pid: str, kids: list[str]) -> None:
    parent = await desk.process(pid)
    assert (parent.state, parent.status) == ("ready", "completed")
    assert sorted(r["id"] for r in parent.data["results"]) == sorted(kids)
    assert all(r["status"] == "completed" for r in parent.data["results"])
    actions = await _actions(desk, pid)
    assert actions.count("$child") == 3
    completed = [m for m in await desk.outbox(pid) if m.type == "workflow.completed"]
    assert len(completed) == 1
    for process_id in (pid, *kids):
        assert (await verify(desk.rt, process_id)).valid


async def test_a_spawn_only_child_refuses_a_direct_start(desk):
    from stateward.domain.errors import DomainError

    with pytest.raises(DomainError) as refused:
        await start_instance(desk.rt, desk.admin, TASK["$path"], {})
    assert refused.value.code == "FORBIDDEN"
