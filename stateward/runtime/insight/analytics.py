"""Workflow analytics over a time window, computed by SQL aggregates (seed §11).

The figures come from `state_visits` (the read model every instance event keeps, see
`persistence/analytics.py`): each is an aggregate query returning one row per state, per
day or per status; no instance or event is loaded into Python. For the window
[from, to] (both ends included), judged at `as_of` (now):

- `status_counts`: instances started in the window, by their status now; `started` their sum;
- `throughput`: instances completed per UTC day of the window (every day listed, zeros too);
- `cycle_time`: start (`$start`) to completion of the instances completed in the window:
  count, mean, p50/p90/p99;
- per state: visits entered in the window, visits left in it (by a state change), instances
  in it now, dwell (entry to leaving) of the visits left in the window, and SLA compliance
  for states with `sla_seconds`: a visit is *met* when it left by its due time (within the
  window), *breached* when its due time falls in the window (and has passed) and it was
  still there then, left late, or had a breach recorded; visits ended by completion, cancel
  or error before their due time, and those not due yet, are not decided.
  compliance = met / (met + breached).

Percentiles interpolate linearly between ranks (PostgreSQL's `percentile_cont`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from stateward.domain.errors import INVALID_INPUT, NOT_FOUND, DomainError
from stateward.persistence.analytics import AnalyticsRepository, Spread, Window
from stateward.runtime.core.services import Runtime

#: `period` is a number of days or hours back from now: "7d", "24h".
PERIOD = re.compile(r"^([1-9][0-9]{0,4})([dh])$")
DEFAULT_PERIOD = "7d"
#: The longest window (its throughput lists one entry per day).
MAX_WINDOW = timedelta(days=366)
DAY_MS = 86_400_000


@dataclass(frozen=True)
class Durations:
    """count, mean and percentiles of durations in seconds (None when count is 0)."""

    count: int
    mean_seconds: float | None
    p50_seconds: float | None
    p90_seconds: float | None
    p99_seconds: float | None

    @classmethod
    def of(cls, spread: Spread) -> Durations:
        def s(ms: float | None) -> float | None:
            return None if ms is None else ms / 1000

        p50, p90, p99 = (s(v) for v in spread.percentiles_ms)
        return cls(spread.count, s(spread.mean_ms), p50, p90, p99)


@dataclass(frozen=True)
class StateAnalytics:
    """Figures of one state over the window (see the module docstring)."""

    state: str
    label: str | None
    entered: int
    left: int
    current: int
    dwell: Durations
    sla_seconds: float | None
    sla_met: int
    sla_breached: int
    sla_compliance: float | None


@dataclass(frozen=True)
class DayCount:
    """Instances completed on one UTC day."""

    day: date
    completed: int


@dataclass(frozen=True)
class StatusCount:
    """Instances (started in the window) with this status now."""

    status: str
    count: int


@dataclass(frozen=True)
class WorkflowAnalytics:
    """Figures of a workflow (all versions, or one) over [from_, to] as of `as_of`."""

    workflow: str
    version: int | None
    from_: datetime
    to: datetime
    as_of: datetime
    started: int
    status_counts: tuple[StatusCount, ...]
    throughput: tuple[DayCount, ...]
    cycle_time: Durations
    states: tuple[StateAnalytics, ...]


def window(
    now: datetime,
    period: str | None = None,
    from_: datetime | None = None,
    to: datetime | None = None,
) -> tuple[datetime, datetime]:
    """The window [from, to] (both ends included) of `period` ("7d", "24h": back from
    now) or `from`/`to` (`to` defaults to now, `from` to 7 days before `to`).
    INVALID_INPUT with a pointer when both are given, the period is malformed, from >= to
    or the window is longer than a year."""
    if period is not None and (from_ is not None or to is not None):
        raise DomainError(INVALID_INPUT, "give period or from/to, not both", pointer="/period")
    if from_ is None and to is None:
        match = PERIOD.match(period or DEFAULT_PERIOD)
        if match is None:
            raise DomainError(
                INVALID_INPUT,
                'period is a number of days or hours, e.g. "7d" or "24h"',
                pointer="/period",
            )
        amount, unit = int(match.group(1)), match.group(2)
        span = timedelta(days=amount) if unit == "d" else timedelta(hours=amount)
        if span > MAX_WINDOW:
            raise DomainError(INVALID_INPUT, "period is at most 366 days", pointer="/period")
        return now - span, now
    end = to.astimezone(UTC) if to is not None else now
    start = from_.astimezone(UTC) if from_ is not None else end - timedelta(days=7)
    if start >= end:
        raise DomainError(INVALID_INPUT, "from must be before to", pointer="/from")
    if end - start > MAX_WINDOW:
        raise DomainError(INVALID_INPUT, "the window is at most 366 days", pointer="/from")
    return start, end


def _ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


async def analytics(
    runtime: Runtime,
    workflow_path: str,
    version: int | None = None,
    *,
    period: str | None = None,
    from_: datetime | None = None,
    to: datetime | None = None,
) -> WorkflowAnalytics:
    """Analytics of `workflow_path` (every version, or only instances pinned to `version`)
    over the window (see `window`). NOT_FOUND when the path was never deployed. States are
    listed in the order of the version named (else the latest), then states that only
    older versions' instances visited."""
    now = runtime.clock.now()
    start, end = window(now, period, from_, to)
    w = Window(workflow_path, version, _ms(start), _ms(end), _ms(now))
    async with runtime.uow(readonly=True) as uow:
        current = await uow.workflows.get(workflow_path)
        if current is None:
            raise DomainError(NOT_FOUND, f"workflow {workflow_path} was never deployed")
        definition = await runtime.definition(
            uow, workflow_path, version if version is not None else current.latest_version
        )
        repo = AnalyticsRepository(uow.session)
        statuses = await repo.status_counts(workflow_path, version, w.from_ms, w.to_ms)
        per_day = await repo.completions_per_day(w)
        cycle = await repo.cycle_time(w)
        figures = {f.state: f for f in await repo.states(w)}
    states = []
    for key in [*definition.states, *sorted(k for k in figures if k not in definition.states)]:
        f = figures.get(key)
        declared = definition.states.get(key)
        decided = (f.sla_met + f.sla_breached) if f else 0
        states.append(
            StateAnalytics(
                state=key,
                label=declared.label if declared is not None else None,
                entered=f.entered if f else 0,
                left=f.left if f else 0,
                current=f.current if f else 0,
                dwell=Durations.of(f.dwell) if f else Durations(0, None, None, None, None),
                sla_seconds=declared.sla_seconds if declared is not None else None,
                sla_met=f.sla_met if f else 0,
                sla_breached=f.sla_breached if f else 0,
                sla_compliance=f.sla_met / decided if f and decided else None,
            )
        )
    first_day, last_day = w.from_ms // DAY_MS, w.to_ms // DAY_MS
    epoch = date(1970, 1, 1)
    return WorkflowAnalytics(
        workflow=workflow_path,
        version=version,
        from_=start,
        to=end,
        as_of=now,
        started=sum(statuses.values()),
        status_counts=tuple(StatusCount(s, n) for s, n in sorted(statuses.items())),
        throughput=tuple(
            DayCount(epoch + timedelta(days=d), per_day.get(d, 0))
            for d in range(first_day, last_day + 1)
        ),
        cycle_time=Durations.of(cycle),
        states=tuple(states),
    )
