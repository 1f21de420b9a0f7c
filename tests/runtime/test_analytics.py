"""Analytics from the event log, on a scenario timed by hand with the ManualClock."""

from __future__ import annotations

import copy
import time
from datetime import datetime, timedelta
from typing import Any

import pytest

from stateward.domain.errors import DomainError
from stateward.runtime.access import registry
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.core.commands import cancel_instance, perform_action, start_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.analytics import analytics, percentile
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


def test_percentiles_interpolate_between_ranks():
    assert percentile([], 0.5) is None
    assert percentile([7], 0.9) == 7
    assert percentile([60, 200], 0.5) == 130
    assert percentile([60, 200], 0.9) == pytest.approx(186)
    assert percentile([30, 10, 10, 10], 0.5) == 10


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
    assert (report.started, report.completed, report.cancelled, report.active) == (5, 2, 1, 2)
    assert report.errored == 0 and report.replay_failures == 0
    assert report.cycle_time_p50_seconds == 130
    assert report.cycle_time_p90_seconds == pytest.approx(186)
    assert report.cycle_time_mean_seconds == 130
    states = {s.state: s for s in report.states}
    assert [s.state for s in report.states] == ["intake", "review", "done", "rejected"]
    intake, review = states["intake"], states["review"]
    assert (intake.entered, intake.left, intake.current) == (5, 4, 1)
    assert (intake.dwell_mean_seconds, intake.dwell_p50_seconds) == (15, 10)
    assert intake.sla_compliance is None
    assert (review.entered, review.left, review.current) == (4, 2, 1)
    assert (review.dwell_mean_seconds, review.dwell_p50_seconds) == (110, 110)
    assert (review.sla_seconds, review.sla_met, review.sla_breached) == (100, 1, 2)
    assert review.sla_compliance == pytest.approx(1 / 3)
    assert (states["done"].entered, states["rejected"].entered) == (1, 1)
    assert states["done"].dwell_mean_seconds is None
    assert report.as_dict()["states"][1]["sla_met"] == 1


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
    assert (report.started, report.cycle_time_p50_seconds) == (0, None)
    assert [s.entered for s in report.states] == [0, 0, 0, 0]


@pytest.mark.slow
async def test_thousands_of_instances_are_analysed_in_one_pass(admin_rt, operator, clock):
    """2,000 instances / 6,000 events: one query plus an in-memory replay."""
    await registry.deploy_workflow(admin_rt, operator, DESK)
    desk = Desk(admin_rt, clock, operator.public)
    ids = [await desk.start() for _ in range(2000)]
    clock.advance(5)
    for pid in ids:
        await desk.do(pid, "submit")
    clock.advance(20)
    for pid in ids[:1000]:
        await desk.do(pid, "approve")
    began = time.perf_counter()
    report = await analytics(admin_rt, DESK["$path"])
    elapsed = time.perf_counter() - began
    assert (report.started, report.completed, report.events_read) == (2000, 1000, 5000)
    assert elapsed < 5, f"analytics took {elapsed:.2f} s"
    print(f"analytics of 2000 instances / 5000 events: {elapsed * 1000:.0f} ms")
