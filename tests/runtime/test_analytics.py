"""Analytics by SQL aggregates, on a scenario timed by hand with the ManualClock."""

from __future__ import annotations

import asyncio
import copy
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from stateward.domain.errors import DomainError
from stateward.runtime.access import registry
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.core.commands import cancel_instance, perform_action, start_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.analytics import analytics, window
from stateward.runtime.sweeps import sla

DESK: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/ticket",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "review": {"label": "Review", "assign": "analyst", "sla_seconds": 100},
        "done": {"label": "Done", "terminal": True},
        "rejected": {"label": "Rejected", "terminal": True},
    },
    "actions": {
        "submit": {"from": "intake", "to": "review"},
        "note": {"from": "review", "mutate": {"$increment": {"notes": 1}}},
        "approve": {"role": "admin", "from": "review", "to": "done"},
        "reject": {"role": "admin", "from": "review", "to": "rejected"},
    },
}


class Desk:
    """Drives instances of DESK as the operator, with the test's clock."""

    def __init__(self, runtime: Runtime, clock: ManualClock, actor: str) -> None:
        self.runtime, self.clock, self.actor = runtime, clock, actor

    async def start(self) -> str:
        return (await start_instance(self.runtime, self.actor, DESK["$path"])).record.id

    async def do(self, instance: str, action: str) -> None:
        await perform_action(self.runtime, self.actor, instance, action)

    def at(self, seconds: float, t0: datetime) -> None:
        self.clock.set(t0 + timedelta(seconds=seconds))


def test_the_window_is_a_period_or_from_to():
    now = datetime(2026, 3, 10, 12, tzinfo=UTC)
    assert window(now) == (now - timedelta(days=7), now)
    assert window(now, "24h") == (now - timedelta(hours=24), now)
    assert window(now, from_=now - timedelta(days=2)) == (now - timedelta(days=2), now)
    for bad, pointer in [
        ({"period": "7 days"}, "/period"),
        ({"period": "0d"}, "/period"),
        ({"period": "400d"}, "/period"),
        ({"period": "7d", "to": now}, "/period"),
        ({"from_": now, "to": now}, "/from"),
        ({"from_": now - timedelta(days=400)}, "/from"),
    ]:
        with pytest.raises(DomainError) as info:
            window(now, **bad)  # type: ignore[arg-type]
        assert (info.value.code, info.value.pointer) == ("INVALID_INPUT", pointer)


async def test_figures_equal_the_hand_computed_values(admin_rt, operator, clock):
    await registry.deploy_workflow(admin_rt, operator, DESK)
    desk, t0 = Desk(admin_rt, clock, operator.public), clock.now()
    a, b = await desk.start(), await desk.start()  # both at t0
    desk.at(10, t0)
    await desk.do(a, "submit")  # a: intake 10 s
    desk.at(30, t0)
    await desk.do(b, "submit")  # b: intake 30 s
    desk.at(45, t0)
    await desk.do(b, "note")  # a self-effect: b stays in review
    desk.at(60, t0)
    await desk.do(a, "approve")  # a: review 50 s (met), cycle 60 s
    desk.at(150, t0)
    fired = await sla.scan(admin_rt)  # b is overdue since t0+130: a `$sla` breach event
    assert fired.breaches == [b]
    desk.at(200, t0)
    await desk.do(b, "reject")  # b: review 170 s (breached), cycle 200 s
    c = await desk.start()
    desk.at(210, t0)
    await desk.do(c, "submit")  # c: intake 10 s
    desk.at(220, t0)
    await cancel_instance(admin_rt, operator.public, c)  # review left undecided (not due)
    d = await desk.start()
    desk.at(230, t0)
    await desk.do(d, "submit")  # d: intake 10 s, in review since t0+230
    desk.at(400, t0)
    await desk.start()  # e: in intake now

    report = await analytics(admin_rt, DESK["$path"])  # now = t0+400: d is overdue
    counts = {c.status: c.count for c in report.status_counts}
    assert counts == {"completed": 2, "cancelled": 1, "active": 2} and report.started == 5
    cycle = report.cycle_time  # 60 s and 200 s
    assert (cycle.count, cycle.mean_seconds, cycle.p50_seconds) == (2, 130, 130)
    assert cycle.p90_seconds == pytest.approx(186)
    assert cycle.p99_seconds == pytest.approx(198.6)
    assert sum(d.completed for d in report.throughput) == 2
    assert report.throughput[-1].day == clock.now().date()
    assert len(report.throughput) in (8, 9)  # every UTC day the 7-day window touches
    states = {s.state: s for s in report.states}
    assert [s.state for s in report.states] == ["intake", "review", "done", "rejected"]
    intake, review = states["intake"], states["review"]
    assert (intake.entered, intake.left, intake.current) == (5, 4, 1)
    assert (intake.dwell.mean_seconds, intake.dwell.p50_seconds) == (15, 10)
    assert intake.dwell.p90_seconds == pytest.approx(24)  # 10 10 10 30
    assert intake.sla_compliance is None and intake.label == "Intake"
    assert (review.entered, review.left, review.current) == (4, 2, 1)
    assert (review.dwell.mean_seconds, review.dwell.p50_seconds) == (110, 110)
    assert (review.sla_seconds, review.sla_met, review.sla_breached) == (100, 1, 2)
    assert review.sla_compliance == pytest.approx(1 / 3)
    assert (states["done"].entered, states["rejected"].entered) == (1, 1)
    assert states["done"].dwell.count == 0 and states["done"].dwell.mean_seconds is None

    # A window ending before b was due (t0+130) and after a left review: only a is decided.
    early = await analytics(admin_rt, DESK["$path"], from_=t0, to=t0 + timedelta(seconds=100))
    early_review = {s.state: s for s in early.states}["review"]
    assert (early_review.sla_met, early_review.sla_breached) == (1, 0)
    assert early.cycle_time.count == 1 and early.cycle_time.p99_seconds == 60
    assert early.started == 2  # a and b started at t0


async def test_a_version_filter_counts_only_instances_pinned_to_it(admin_rt, operator, clock):
    await registry.deploy_workflow(admin_rt, operator, DESK)
    desk = Desk(admin_rt, clock, operator.public)
    await desk.start()
    changed = copy.deepcopy(DESK)
    changed["$description"] = "v2"
    await registry.update_workflow(admin_rt, operator, changed)
    await desk.start()
    await desk.start()
    assert (await analytics(admin_rt, DESK["$path"], 1)).started == 1
    assert (await analytics(admin_rt, DESK["$path"], 2)).started == 2
    assert (await analytics(admin_rt, DESK["$path"])).started == 3


async def test_unknown_workflows_are_not_found_and_unused_ones_are_empty(admin_rt, operator):
    with pytest.raises(DomainError) as info:
        await analytics(admin_rt, "ops/desk/nothing")
    assert info.value.code == "NOT_FOUND"
    await registry.deploy_workflow(admin_rt, operator, DESK)
    report = await analytics(admin_rt, DESK["$path"])
    assert (report.started, report.cycle_time.p50_seconds) == (0, None)
    assert [s.entered for s in report.states] == [0, 0, 0, 0]


@pytest.mark.slow
async def test_thousands_of_instances_are_analysed_in_sql(admin_rt, operator, clock):
    """2,000 instances / 5,000 events: a handful of aggregate queries."""
    await registry.deploy_workflow(admin_rt, operator, DESK)
    desk = Desk(admin_rt, clock, operator.public)
    # Set up through group commit, 100 events in flight (one by one it took over the
    # 180 s test timeout on PostgreSQL on a loaded two-core box).
    ids: list[str] = []
    for _ in range(20):
        ids += await asyncio.gather(*(desk.start() for _ in range(100)))
    clock.advance(5)
    for chunk in range(0, 2000, 100):
        await asyncio.gather(*(desk.do(pid, "submit") for pid in ids[chunk : chunk + 100]))
    clock.advance(20)
    for chunk in range(0, 1000, 100):
        await asyncio.gather(*(desk.do(pid, "approve") for pid in ids[chunk : chunk + 100]))
    began = time.perf_counter()
    report = await analytics(admin_rt, DESK["$path"])
    elapsed = time.perf_counter() - began
    assert (report.started, report.cycle_time.count) == (2000, 1000)
    assert report.cycle_time.p50_seconds == 25
    assert elapsed < 5, f"analytics took {elapsed:.2f} s"
    print(f"analytics of 2000 instances / 5000 events: {elapsed * 1000:.0f} ms")
