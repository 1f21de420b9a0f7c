"""Typed workflow analytics (`Workflow.analytics`), mapped from `runtime.insight.analytics`."""

from __future__ import annotations

from datetime import date, datetime

import strawberry

from stateward.runtime.insight import analytics as figures
from stateward.schema.enums import InstanceStatus


@strawberry.type(description="count, mean and percentiles of durations, in seconds.")
class Durations:
    count: int
    mean_seconds: float | None
    p50_seconds: float | None
    p90_seconds: float | None
    p99_seconds: float | None

    @classmethod
    def of(cls, d: figures.Durations) -> Durations:
        return cls(
            count=d.count,
            mean_seconds=d.mean_seconds,
            p50_seconds=d.p50_seconds,
            p90_seconds=d.p90_seconds,
            p99_seconds=d.p99_seconds,
        )


@strawberry.type(description="Figures of one state over the window.")
class StateAnalytics:
    state: str
    label: str | None
    entered: int = strawberry.field(description="Visits that entered it in the window.")
    left: int = strawberry.field(description="Visits that left it (state change) in the window.")
    current: int = strawberry.field(description="Instances in it now.")
    dwell: Durations = strawberry.field(description="Entry to leaving, of the visits left.")
    sla_seconds: float | None
    sla_met: int
    sla_breached: int
    sla_compliance: float | None = strawberry.field(
        description="met / (met + breached); null when nothing was decided."
    )


@strawberry.type(description="Instances completed on one UTC day.")
class DayCount:
    day: date
    completed: int


@strawberry.type(description="Instances started in the window with this status now.")
class StatusCount:
    status: InstanceStatus
    count: int


@strawberry.type(
    description="Analytics of a workflow over a window [from, to] (SQL aggregates of the "
    "state visits; definitions in docs/decisions.md)."
)
class WorkflowAnalytics:
    workflow: str
    version: int | None
    from_: datetime = strawberry.field(name="from")
    to: datetime
    as_of: datetime
    started: int
    status_counts: list[StatusCount]
    throughput: list[DayCount] = strawberry.field(description="Every UTC day of the window.")
    cycle_time: Durations = strawberry.field(description="Start to completion.")
    states: list[StateAnalytics]

    @classmethod
    def of(cls, a: figures.WorkflowAnalytics) -> WorkflowAnalytics:
        return cls(
            workflow=a.workflow,
            version=a.version,
            from_=a.from_,
            to=a.to,
            as_of=a.as_of,
            started=a.started,
            status_counts=[
                StatusCount(status=InstanceStatus(c.status), count=c.count) for c in a.status_counts
            ],
            throughput=[DayCount(day=d.day, completed=d.completed) for d in a.throughput],
            cycle_time=Durations.of(a.cycle_time),
            states=[
                StateAnalytics(
                    state=s.state,
                    label=s.label,
                    entered=s.entered,
                    left=s.left,
                    current=s.current,
                    dwell=Durations.of(s.dwell),
                    sla_seconds=s.sla_seconds,
                    sla_met=s.sla_met,
                    sla_breached=s.sla_breached,
                    sla_compliance=s.sla_compliance,
                )
                for s in a.states
            ],
        )
