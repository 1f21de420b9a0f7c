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
from stateward.runtime.access import registry
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
        await registry.trust_node(desk.rt, desk.operator, other.node_key.public)
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


# --- children that end in `error`, or are spawned straight into an end (issue 14) ---

HOOKS = """
def boom(ctx):
    fail("boom")
"""
FLAKY: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/flaky-task",
    "initial": "open",
    "start": {"spawn_only": True},
    "states": {
        "open": {"label": "Open"},
        "checking": {"label": "Checking", "audience": "system", "hook": "hooks:boom"},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "finish": {"from": "open", "to": "done"},
        "check": {"from": "open", "to": "checking"},
        "after_check": {"from": "checking", "to": "done"},
    },
}
MIXED: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/mixed",
    "initial": "draft",
    "states": {
        "draft": {"label": "Draft"},
        "parallel": {"label": "Parallel", "await": {"children": "all", "then": "joined"}},
        "ready": {"label": "Ready", "terminal": True},
    },
    "actions": {
        "begin": {
            "from": "draft",
            "to": "parallel",
            "spawn": [
                {"workflow": "ops/desk/flaky-task", "each": {"$ref": "data.teams"}},
                {"workflow": "ops/desk/flaky-task", "to": "done", "as": "skipped"},
            ],
        },
        "skip_all": {
            "from": "draft",
            "to": "parallel",
            "spawn": [{"workflow": "ops/desk/flaky-task", "each": "input.teams", "to": "done"}],
        },
        "joined": {
            "role": "system",
            "from": "parallel",
            "to": "ready",
            "mutate": {"$set": {"results": "input.children"}},
        },
    },
}


@pytest.fixture
async def mixed(admin_rt, operator) -> Any:
    from stateward.runtime.access import registry
    from stateward.runtime.hooks import automation
    from stateward.runtime.hooks.runner import HookRunner

    async with HookRunner(workers=1) as runner:
        await registry.add_module(admin_rt, operator, "ops/desk", "hooks", HOOKS)
        desk = await Desk(admin_rt, operator).setup(FLAKY, MIXED)
        automation.install(admin_rt, runner)
        yield desk


async def test_an_errored_child_and_one_spawned_into_its_end_are_reported_and_counted(mixed):
    desk = mixed
    pid = (
        await start_instance(desk.rt, desk.admin, MIXED["$path"], {"teams": ["a", "b"]})
    ).record.id
    begun = await perform_action(desk.rt, desk.admin, pid, "begin", {})
    first, second, skipped = (c.id for c in begun.children)
    assert (await desk.process(skipped)).status == "completed"
    parent = await desk.process(pid)
    # The child born completed is recorded by a `$child` right after the parent's event.
    assert await _actions(desk, pid) == ["$start", "begin", "$child"]
    assert parent.data["$children"][skipped]["status"] == "completed"
    assert parent.state == "parallel"
    await perform_action(desk.rt, desk.admin, first, "finish", {})
    await perform_action(desk.rt, desk.admin, second, "check", {})  # its hook fails
    assert (await desk.process(second)).status == "error"
    parent = await desk.process(pid)
    # An errored child counts as ended: the join fired, its `then` sees the status.
    assert (parent.state, parent.status) == ("ready", "completed")
    statuses = {r["id"]: r["status"] for r in parent.data["results"]}
    assert statuses == {first: "completed", second: "error", skipped: "completed"}
    # Cancelling the errored child is reported too (the parent's view stays true).
    from stateward.runtime.core.commands import cancel_instance

    await cancel_instance(desk.rt, desk.admin, second, "given up")
    parent = await desk.process(pid)
    assert parent.data["$children"][second]["status"] == "cancelled"
    assert (await _actions(desk, pid)).count("$child") == 4
    completed = [m for m in await desk.outbox(pid) if m.type == "workflow.completed"]
    assert len(completed) == 1
    for process_id in (pid, first, second, skipped):
        assert (await verify(desk.rt, process_id)).valid


async def test_children_all_spawned_into_their_end_complete_the_join_at_once(mixed):
    desk = mixed
    pid = (await start_instance(desk.rt, desk.admin, MIXED["$path"], {})).record.id
    result = await perform_action(desk.rt, desk.admin, pid, "skip_all", {"teams": [1, 2, 3]})
    assert len(result.children) == 3
    parent = await desk.process(pid)
    assert (parent.state, parent.status) == ("ready", "completed")
    assert await _actions(desk, pid) == ["$start", "skip_all", "$child", "$child", "$child"]
    messages = [m.payload["seq"] for m in await desk.outbox(pid)]
    assert messages == sorted(messages)  # the parent's event first, then its `$child`s
    assert (await verify(desk.rt, pid)).valid


# --- children in another namespace (issue 14: joins across namespaces) ---

REMOTE_TASK: dict[str, Any] = {
    **TASK,
    "$path": "fin/pay/remote-task",
    "states": {
        "open": {"label": "Open"},
        "done": {"label": "Done", "terminal": True, "returns": ["note"]},
    },
    "actions": {
        "finish": {"from": "open", "to": "done", "mutate": {"$set": {"note": "input.note"}}},
        "drop": {"from": "open", "to": "$cancel"},
    },
}
REMOTE_PARENT: dict[str, Any] = {
    **ONBOARDING,
    "$path": "ops/desk/remote-onboarding",
    "actions": {
        **ONBOARDING["actions"],
        "begin": {
            "from": "draft",
            "to": "parallel",
            "spawn": [
                {"workflow": "fin/pay/remote-task", "each": {"$ref": "data.teams"}, "as": "tasks"}
            ],
        },
    },
}


@pytest.fixture
async def remote(admin_rt, operator) -> Desk:
    from stateward.runtime.access import registry
    from stateward.runtime.access.references import allow_spawn

    await registry.deploy_workflow(admin_rt, operator, REMOTE_TASK)
    await allow_spawn(admin_rt, operator, "fin/pay", "ops/desk")
    return await Desk(admin_rt, operator).setup(REMOTE_PARENT)


async def test_a_join_waits_for_children_in_another_namespace(remote):
    desk = remote
    data = {"teams": ["x", "y"]}
    pid = (await start_instance(desk.rt, desk.admin, REMOTE_PARENT["$path"], data)).record.id
    kids = [c.id for c in (await perform_action(desk.rt, desk.admin, pid, "begin", {})).children]
    for kid in kids:
        child = await desk.process(kid)
        assert (child.namespace, child.parent_id, child.started_by) == ("fin/pay", pid, desk.admin)
    await perform_action(desk.rt, desk.admin, kids[0], "finish", {"note": "paid"})
    assert (await desk.process(pid)).state == "parallel"
    await perform_action(desk.rt, desk.admin, kids[1], "drop", {})
    parent = await desk.process(pid)
    assert (parent.state, parent.status) == ("ready", "completed")
    by_id = {r["id"]: r for r in parent.data["results"]}
    assert by_id[kids[0]]["result"] == {"note": "paid"}
    assert by_id[kids[1]]["status"] == "cancelled"
    for process_id in (pid, *kids):
        assert (await verify(desk.rt, process_id)).valid


async def test_a_withdrawn_grant_hides_the_childs_end_from_its_parent(remote):
    from stateward.runtime.access.references import allow_spawn

    desk = remote
    data = {"teams": ["x"]}
    pid = (await start_instance(desk.rt, desk.admin, REMOTE_PARENT["$path"], data)).record.id
    (kid,) = [c.id for c in (await perform_action(desk.rt, desk.admin, pid, "begin", {})).children]
    await allow_spawn(desk.rt, desk.operator, "fin/pay", "ops/desk", allow=False)
    await perform_action(desk.rt, desk.admin, kid, "finish", {"note": "paid"})
    assert (await desk.process(kid)).status == "completed"
    parent = await desk.process(pid)
    assert parent.state == "parallel" and "$child" not in await _actions(desk, pid)


async def test_verify_replays_the_child_events_a_forged_result_is_caught(desk):
    """`$child` is replayed, not trusted: a `$child` envelope whose reported result was
    changed after the fact breaks its signature and hash, and the parent's replayed data
    (the join's `then` mapped the results) no longer matches the stored data."""
    import json

    from sqlalchemy import text

    pid, kids = await _begin(desk.rt, desk)
    for n, kid in enumerate(kids):
        await perform_action(desk.rt, desk.analysts[n], kid, "finish", {"note": f"note-{n}"})
    assert (await desk.process(pid)).status == "completed"
    assert (await verify(desk.rt, pid)).valid
    async with desk.rt.uow() as uow:
        events = await uow.events.for_process(pid)
        (first,) = [
            e for e in events if e.action == "$child" and json.dumps(e.input).count("note-0")
        ]
        forged = first.envelope.replace('"note-0"', '"forged"')
        assert forged != first.envelope
        await uow.session.execute(
            text("UPDATE events SET envelope = :v WHERE process_id = :p AND seq = :s"),
            {"v": forged, "p": pid, "s": first.seq},
        )
        await uow.commit()
    report = await verify(desk.rt, pid)
    codes = {(p.seq, p.code) for p in report.problems}
    assert (first.seq, "HASH_MISMATCH") in codes and (first.seq, "BAD_SIGNATURE") in codes
    assert any(code == "DATA_MISMATCH" for _, code in codes), codes
