"""Bulk operations (issue 15): one signed event per instance, in pages, exactly once across
nodes and after a kill, failures recorded per instance, cancellable."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kernel_fixtures import DESK, TICKET, Desk

from stateward.domain.errors import DomainError
from stateward.runtime.access import registry
from stateward.runtime.batches import bulk
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.insight.verify import verify

WORKER = Path(__file__).with_name("batch_worker.py")


@pytest.fixture
async def desk(admin_rt, operator) -> Desk:
    return await Desk(admin_rt, operator).setup(TICKET)


async def _tickets(desk: Desk, n: int) -> list[str]:
    ids: list[str] = []
    for start in range(0, n, 50):
        results = await asyncio.gather(
            *(start_instance(desk.rt, desk.admin, TICKET["$path"], {})
              for _ in range(min(50, n - start)))
        )  # fmt: skip
        ids.extend(r.record.id for r in results)
    return ids


async def _cancels(desk: Desk, ids: list[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    async with desk.rt.uow(readonly=True) as uow:
        for pid in ids:
            counts[pid] = [e.action for e in await uow.events.for_process(pid)].count("$cancel")
    return counts


async def test_a_bulk_cancel_cancels_each_instance_once_with_its_own_event(desk):
    ids = await _tickets(desk, 7)
    batch = await bulk.create(desk.rt, desk.admin, "cancel", {"reason": "cleanup"}, ids)
    assert (batch.status, batch.total) == ("running", 7)
    progress = await bulk.process(desk.rt, batch.id, page=3)
    assert (progress.succeeded, progress.pages, progress.done) == (7, 3, True)
    done = await bulk.get(desk.rt, batch.id)
    assert done is not None
    assert (done.status, done.succeeded, done.failed) == ("completed", 7, 0)
    assert done.finished_at is not None
    for pid in ids:
        record = await desk.process(pid)
        assert record.status == "cancelled"
    async with desk.rt.uow(readonly=True) as uow:
        last = (await uow.events.for_process(ids[0]))[-1]
    assert (last.action, last.actor, last.signer) == ("$cancel", "system", desk.rt.node_public)
    assert last.input == {"reason": "cleanup"}
    assert (await verify(desk.rt, ids[0])).valid
    assert set((await _cancels(desk, ids)).values()) == {1}


async def test_failures_are_recorded_per_instance_and_the_rest_goes_on(desk):
    ids = await _tickets(desk, 4)
    await perform_action(desk.rt, desk.admin, ids[1], "submit", {})
    batch = await bulk.create(desk.rt, desk.admin, "action", {"action": "submit"}, ids)
    await bulk.process(desk.rt, batch.id)
    done = await bulk.get(desk.rt, batch.id)
    assert done is not None and (done.succeeded, done.failed) == (3, 1)
    async with desk.rt.uow(readonly=True) as uow:
        errors = await uow.batches.errors(batch.id, -1, 10)
    assert [(e.process_id, e.code) for e in errors] == [(ids[1], "WRONG_STATE")]


async def test_running_a_batch_again_applies_nothing_twice(desk):
    ids = await _tickets(desk, 5)
    batch = await bulk.create(desk.rt, desk.admin, "cancel", {}, ids)
    async with desk.rt.uow() as uow:  # a node claimed everything, applied two, then died
        items = await uow.batches.claim(batch.id, 10, "dead-node", desk.rt.clock.now(),
                                        desk.rt.clock.now())  # fmt: skip
        await uow.commit()
    stale = bulk.Progress()
    for item in items[:2]:
        status, _, _ = await bulk._apply(desk.rt, batch, item, await desk.process(item.process_id))
        assert status == "succeeded"
        stale.succeeded += 1
    assert (await bulk.process(desk.rt, batch.id)).succeeded == 0  # the lease still holds
    desk.rt.clock.advance(bulk.LEASE_SECONDS + 1)
    progress = await bulk.process(desk.rt, batch.id)
    assert (progress.succeeded, progress.done) == (5, True)
    assert set((await _cancels(desk, ids)).values()) == {1}


async def test_a_cancelled_batch_skips_what_is_left(desk):
    ids = await _tickets(desk, 6)
    batch = await bulk.create(desk.rt, desk.admin, "cancel", {}, ids)
    await bulk.process(desk.rt, batch.id, page=2, pages=1)
    stopped = await bulk.cancel(desk.rt, desk.admin, batch.id)
    assert (stopped.status, stopped.succeeded) == ("cancelled", 2)
    assert (await bulk.process(desk.rt, batch.id)).succeeded == 0
    async with desk.rt.uow(readonly=True) as uow:
        statuses = Counter(i.status for i in await uow.batches.items_of(batch.id))
    assert statuses == {"succeeded": 2, "skipped": 4}
    with pytest.raises(DomainError) as err:
        await bulk.cancel(desk.rt, desk.member, batch.id)
    assert err.value.code == "NOT_FOUND"


async def test_who_may_run_a_bulk_operation(desk):
    with pytest.raises(DomainError) as err:
        await bulk.operable_namespaces(desk.rt, desk.outsider, DESK)
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(DomainError) as err:
        await bulk.operable_namespaces(desk.rt, desk.member, DESK)
    assert err.value.code == "FORBIDDEN"
    with pytest.raises(DomainError) as err:
        await bulk.operable_namespaces(desk.rt, desk.member, None)
    assert err.value.code == "FORBIDDEN"
    await registry.grant_role(desk.rt, desk.operator, DESK, desk.member, ["operator"])
    assert await bulk.operable_namespaces(desk.rt, desk.member, DESK) == [DESK]
    assert await bulk.operable_namespaces(desk.rt, desk.member, None) == [DESK]
    assert await bulk.operable_namespaces(desk.rt, desk.admin, None) is None


@pytest.mark.parametrize(
    ("kind", "params", "pointer"),
    [("delete", {}, "/kind"), ("action", {"action": "$cancel"}, "/action"),
     ("action", {"action": "a", "input": [1]}, "/input")],
)  # fmt: skip
async def test_bad_batch_parameters_are_refused(desk, kind, params, pointer):
    with pytest.raises(DomainError) as err:
        await bulk.create(desk.rt, desk.admin, kind, params, [])
    assert (err.value.code, err.value.pointer) == ("INVALID_INPUT", pointer)


async def _node(
    url: str, batch_id: str, page: int = 50, *, barrier: bool = False
) -> asyncio.subprocess.Process:
    """A node working on `batch_id`; with `barrier`, it waits for `_go` once it says ready."""
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    return await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), url, batch_id, str(page),
        *(["--barrier"] if barrier else []),
        stdin=asyncio.subprocess.PIPE if barrier else None,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip


async def _go(*nodes: asyncio.subprocess.Process) -> None:
    """Wait until every node is ready, then let them all start at once."""
    for node in nodes:
        assert node.stdout is not None and node.stdin is not None
        line = await asyncio.wait_for(node.stdout.readline(), 120)
        assert line.strip() == b"ready", line
    for node in nodes:
        assert node.stdin is not None
        node.stdin.write(b"go\n")
        await node.stdin.drain()


async def _result(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.timeout(900)
async def test_two_nodes_apply_a_2000_instance_batch_exactly_once_each(desk, db_url):
    ids = await _tickets(desk, 2000)
    batch = await bulk.create(desk.rt, desk.admin, "cancel", {"reason": "two nodes"}, ids)
    # both nodes start the work together: on a loaded machine one of them could take
    # longer to start than the other takes to do all 2,000 (seen in CI)
    nodes = [await _node(db_url, batch.id, barrier=True) for _ in range(2)]
    await _go(*nodes)
    a, b = await asyncio.gather(*(_result(node) for node in nodes))
    assert a["succeeded"] + b["succeeded"] == 2000
    assert a["failed"] == b["failed"] == 0
    assert a["succeeded"] > 0 and b["succeeded"] > 0, (a, b)  # both nodes worked
    done = await bulk.get(desk.rt, batch.id)
    assert done is not None and (done.status, done.succeeded) == ("completed", 2000)
    assert set((await _cancels(desk, ids)).values()) == {1}


@pytest.mark.timeout(600)
async def test_a_batch_interrupted_by_a_kill_resumes_and_finishes(desk, db_url):
    ids = await _tickets(desk, 300)
    batch = await bulk.create(desk.rt, desk.admin, "cancel", {}, ids)
    proc = await _node(db_url, batch.id, page=20)
    for _ in range(600):  # until it has done some of the work
        current = await bulk.get(desk.rt, batch.id)
        if current is not None and current.succeeded >= 40:
            break
        await asyncio.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    killed = await bulk.get(desk.rt, batch.id)
    assert killed is not None and killed.status == "running" and killed.succeeded < 300
    # the dead node claimed by the real clock: its claims expire a lease after that
    behind = (datetime.now(UTC) - desk.rt.clock.now()).total_seconds()
    desk.rt.clock.advance(max(behind, 0) + bulk.LEASE_SECONDS + 1)
    progress = await bulk.process(desk.rt, batch.id)
    assert progress.done
    done = await bulk.get(desk.rt, batch.id)
    assert done is not None and (done.status, done.succeeded, done.failed) == ("completed", 300, 0)
    assert set((await _cancels(desk, ids)).values()) == {1}


async def test_a_bulk_migrate_moves_each_instance_with_the_one_migrate_event(desk):
    ids = await _tickets(desk, 3)
    await registry.update_workflow(desk.rt, desk.operator, {**TICKET, "$description": "v2"})
    batch = await bulk.create(desk.rt, desk.admin, "migrate", {"toVersion": 2}, ids)
    progress = await bulk.process(desk.rt, batch.id)
    assert (progress.succeeded, progress.failed) == (3, 0), progress.errors
    for pid in ids:
        assert (await desk.process(pid)).workflow_version == 2
    assert (await desk.actions(ids[0]))[-1] == "$migrate"
    assert (await verify(desk.rt, ids[0])).valid
