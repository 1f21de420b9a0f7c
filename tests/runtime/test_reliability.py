"""Reliability on PostgreSQL: the lock order (no deadlocks between nodes), bounded waits
behind a stalled peer, and transient faults retried inside the server (issue 11)."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kernel_fixtures import TICKET, TIMED, Desk
from sqlalchemy import text

from stateward.domain.errors import DomainError
from stateward.governance.keys import KeyPair, generate_keypair
from stateward.persistence.sequencer import SEQUENCER_LOCK_KEY
from stateward.runtime.access import registry
from stateward.runtime.access.genesis import init
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.group import GroupCommitter
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.verify import verify
from stateward.runtime.ticker import tick
from stateward.settings import Settings

pytestmark = pytest.mark.postgres

QUICK = {**TICKET, "$path": "ops/desk/quick"}
QUICK["states"] = {
    **TICKET["states"],
    "review": {"label": "Review", "assign": "analyst", "sla_seconds": 1},
}
TIMER = {**TIMED, "$path": "ops/desk/quicktimer"}
TIMER["actions"] = {
    **TIMED["actions"],
    "arm": {"from": "waiting", "schedule": [{"action": "expire", "after": 1}]},
}


@pytest.fixture
async def nodes(postgres_db_url: str) -> AsyncIterator[tuple[Runtime, Runtime, KeyPair]]:
    """Two runtimes ("nodes": separate engines and pools, each its own group-commit
    writer) on one fresh PostgreSQL database, initialized; and the operator key."""
    operator = generate_keypair()
    settings = Settings(database_url=postgres_db_url)
    a = await Runtime.open(settings, node_key=generate_keypair())
    b = await Runtime.open(settings, create_schema=False, node_key=generate_keypair())
    try:
        await init(a, operator)
        await registry.trust_node(a, operator, b.node_key.public)  # b attests events too
        await a.refresh_trusted()
        await b.refresh_trusted()
        yield a, b, operator
    finally:
        await a.close()
        await b.close()


async def _deadlocks(rt: Runtime) -> int:
    async with rt.uow(readonly=True) as uow:
        await uow.session.execute(text("SELECT pg_stat_clear_snapshot()"))
        value = await uow.session.execute(
            text("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        )
        return int(value.scalar_one())


async def test_two_nodes_writing_the_same_instances_while_sweeping_never_deadlock(nodes):
    a, b, operator = nodes
    desk = await Desk(a, operator).setup(QUICK, TIMER)
    tickets = []
    for _ in range(6):
        pid = (await start_instance(a, desk.admin, QUICK["$path"], {})).record.id
        await perform_action(a, desk.admin, pid, "submit", {})
        tickets.append(pid)
    timers = []
    for _ in range(6):
        tid = (await start_instance(a, desk.admin, TIMER["$path"], {})).record.id
        await perform_action(a, desk.admin, tid, "arm", {})
        timers.append(tid)
    before = await _deadlocks(a)
    rng = random.Random(11)
    stop = asyncio.Event()
    fired: Counter[str] = Counter()

    async def writer(rt: Runtime, n: int) -> list[str]:
        done = []
        for _ in range(n):
            pid = rng.choice(tickets)
            await perform_action(rt, desk.admin, pid, "note", {})
            done.append(pid)
        return done

    async def sweeper(rt: Runtime) -> None:
        while not stop.is_set():
            report = await tick(rt)
            assert report.errors == {}, report.errors
            fired.update(f"w:{p}" for p in report.sla.warnings)
            fired.update(f"b:{p}" for p in report.sla.breaches)
            fired.update(f"t:{t}" for t in report.timers.fired)
            await asyncio.sleep(0.05)

    sweeps = [asyncio.create_task(sweeper(rt)) for rt in (a, b)]
    written = await asyncio.gather(*(writer(rt, 15) for rt in (a, b) for _ in range(8)))
    await asyncio.sleep(1.5)  # let the last SLA deadlines and timers come due and fire
    stop.set()
    await asyncio.gather(*sweeps)

    assert await _deadlocks(a) - before == 0
    for rt in (a, b):
        committer = rt.committer
        assert isinstance(committer, GroupCommitter)
        assert committer.fallbacks == 0
    notes = Counter(pid for done in written for pid in done)
    for pid in tickets:
        assert (await desk.process(pid)).data.get("notes", 0) == notes[pid]
        kinds = Counter(e.input["kind"] for e in await _log(a, pid) if e.action == "$sla")
        assert kinds == {"warning": 1, "breach": 1}, (pid, kinds)
        assert fired[f"w:{pid}"] == 1 and fired[f"b:{pid}"] == 1
    for tid in timers:
        assert [e.action for e in await _log(a, tid)].count("$timer") == 1
    report = await verify(a)
    assert report.valid, [p.line() for p in report.problems]


async def _in_review(desk: Desk) -> str:
    pid = (await start_instance(desk.rt, desk.admin, QUICK["$path"], {})).record.id
    await perform_action(desk.rt, desk.admin, pid, "submit", {})
    return pid


async def _log(rt: Runtime, pid: str) -> list:
    async with rt.uow(readonly=True) as uow:
        return await uow.events.for_process(pid)


async def test_a_stalled_peer_holding_a_process_row_costs_about_a_second(nodes):
    a, b, operator = nodes
    desk = await Desk(a, operator).setup(QUICK)
    pid = await _in_review(desk)
    async with b.uow() as stalled:  # a node paused inside its transaction (SIGSTOP)
        await stalled.processes.get(pid, for_update=True)
        started = time.monotonic()
        result = await perform_action(a, desk.admin, pid, "note", {})
        waited = time.monotonic() - started
        await asyncio.sleep(0)
    assert result.event.action == "note" and not result.duplicate
    assert waited < 2.5, waited  # lock_timeout 1 s + idle timeout 1 s ended the stalled one
    assert (await desk.process(pid)).data["notes"] == 1


async def test_a_stalled_peer_holding_the_sequencer_lock_costs_about_a_second(nodes):
    a, b, operator = nodes
    desk = await Desk(a, operator).setup(QUICK)
    pid = await _in_review(desk)
    async with b.uow() as stalled:
        await stalled.session.execute(
            text("SELECT pg_advisory_xact_lock(:k)"), {"k": SEQUENCER_LOCK_KEY}
        )
        started = time.monotonic()
        await perform_action(a, desk.admin, pid, "note", {})
        waited = time.monotonic() - started
    assert waited < 2.5, waited
    assert (await desk.process(pid)).data["notes"] == 1


async def test_connections_killed_mid_transaction_are_retried_not_reported(nodes):
    a, b, operator = nodes
    desk = await Desk(a, operator).setup(QUICK)
    tickets = [await _in_review(desk) for _ in range(4)]
    stop = asyncio.Event()
    killed = 0

    async def killer() -> None:  # like pg_terminate_backend from an operator, 12 times
        nonlocal killed
        while not stop.is_set() and killed < 12:
            async with b.uow(readonly=True) as uow:
                rows = await uow.session.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                        "AND state LIKE 'idle in transaction%'"
                    )
                )
                killed += sum(1 for (ok,) in rows if ok)
            await asyncio.sleep(0.05)

    killing = asyncio.create_task(killer())
    results: list[Any] = []
    for round_ in range(8):  # until a kill landed: 60 fast actions may all miss the killer
        results += await asyncio.gather(
            *(
                perform_action(a, desk.admin, tickets[i % 4], "note", {"i": i})
                for i in range(round_ * 60, round_ * 60 + 60)
            )
        )
        if killed:
            break
    stop.set()
    await killing
    assert killed > 0  # the faults really happened
    per_ticket = Counter(r.record.id for r in results)
    for pid in tickets:
        events = await _log(a, pid)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        notes = [e for e in events if e.action == "note"]
        assert len(notes) == per_ticket[pid]  # each acknowledged note stored exactly once
        assert len({e.input["i"] for e in notes}) == len(notes)
    report = await verify(a)
    assert report.valid, [p.line() for p in report.problems]


async def test_bus_messages_carry_the_log_event_they_came_from(nodes):
    a, _b, operator = nodes
    desk = await Desk(a, operator).setup(QUICK)
    pid = await _in_review(desk)
    first = await perform_action(a, desk.admin, pid, "note", {})
    second = await perform_action(a, desk.admin, pid, "note", {})
    one, two = first.outbox[0].message(), second.outbox[0].message()
    assert (one["process"], one["seq"], one["hash"]) == (pid, first.event.seq, first.event.hash)
    assert (two["process"], two["seq"], two["hash"]) == (pid, second.event.seq, second.event.hash)
    assert {k: v for k, v in one.items() if k not in ("id", "at", "seq", "hash")} == {
        k: v for k, v in two.items() if k not in ("id", "at", "seq", "hash")
    }


JOIN_PARENT = {
    "$version": "2.0",
    "$path": "ops/desk/joinparent",
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
            "spawn": [{"workflow": "ops/desk/jointask", "each": {"$ref": "data.teams"}}],
        },
        "note": {"from": "parallel", "mutate": {"$increment": {"notes": 1}}},
        "joined": {"role": "system", "from": "parallel", "to": "ready"},
    },
}
JOIN_TASK = {
    "$version": "2.0",
    "$path": "ops/desk/jointask",
    "initial": "open",
    "start": {"spawn_only": True},
    "states": {
        "open": {"label": "Open", "sla_seconds": 1},
        "done": {"label": "Done", "terminal": True, "returns": ["notes"]},
    },
    "actions": {
        "note": {"from": "open", "mutate": {"$increment": {"notes": 1}}},
        "finish": {"from": "open", "to": "done"},
    },
}


async def test_two_nodes_ending_children_of_the_same_parents_while_sweeping_never_deadlock(nodes):
    """A child's end writes its parent (`$child`): the parent is locked with the child, by
    id, at the start of every transaction (single events and group-commit batches)."""
    a, b, operator = nodes
    desk = await Desk(a, operator).setup(JOIN_TASK, JOIN_PARENT, TIMER)
    parents: dict[str, list[str]] = {}
    for _ in range(4):
        data = {"teams": ["hr", "it", "facilities", "legal", "travel"]}
        pid = (await start_instance(a, desk.admin, JOIN_PARENT["$path"], data)).record.id
        parents[pid] = [
            c.id for c in (await perform_action(a, desk.admin, pid, "begin", {})).children
        ]
    for _ in range(4):
        tid = (await start_instance(a, desk.admin, TIMER["$path"], {})).record.id
        await perform_action(a, desk.admin, tid, "arm", {})
    kids = [k for ks in parents.values() for k in ks]
    before = await _deadlocks(a)
    rng = random.Random(14)
    stop = asyncio.Event()

    async def busy(rt: Runtime, n: int) -> None:  # notes on parents and children, mixed
        for _ in range(n):
            target = rng.choice([*parents, *kids])
            try:
                await perform_action(rt, desk.admin, target, "note", {})
            except DomainError as error:  # it ended meanwhile: nothing else is expected
                assert error.code in ("INACTIVE_PROCESS", "WRONG_STATE"), error

    async def sweeper(rt: Runtime) -> None:
        while not stop.is_set():
            report = await tick(rt)
            assert report.errors == {}, report.errors
            await asyncio.sleep(0.05)

    sweeps = [asyncio.create_task(sweeper(rt)) for rt in (a, b)]
    await asyncio.gather(*(busy(rt, 10) for rt in (a, b) for _ in range(4)))
    order = kids[:]
    rng.shuffle(order)

    async def finish(n: int, kid: str) -> None:
        await asyncio.sleep(0.01 * (n // 4))
        await perform_action((a, b)[n % 2], desk.admin, kid, "finish", {})

    await asyncio.gather(
        *(finish(n, kid) for n, kid in enumerate(order)),
        *(busy(rt, 12) for rt in (a, b) for _ in range(6)),
    )
    await asyncio.sleep(1.2)  # the last SLA marks and timers
    stop.set()
    await asyncio.gather(*sweeps)

    assert await _deadlocks(a) - before == 0
    for rt in (a, b):
        assert isinstance(rt.committer, GroupCommitter)
        assert rt.committer.fallbacks == 0
    for pid, children in parents.items():
        parent = await desk.process(pid)
        assert (parent.state, parent.status) == ("ready", "completed")
        actions = [e.action for e in await _log(a, pid)]
        assert actions.count("$child") == len(children)
        assert sorted(
            e.input["child"] for e in await _log(a, pid) if e.action == "$child"
        ) == sorted(children)
        completed = [m for m in await desk.outbox(pid) if m.type == "workflow.completed"]
        assert len(completed) == 1  # the join fired once
        for kid in children:
            kinds = Counter(e.input["kind"] for e in await _log(a, kid) if e.action == "$sla")
            assert kinds["breach"] <= 1 and kinds["warning"] <= 1
    report = await verify(a)
    assert report.valid, [p.line() for p in report.problems]
