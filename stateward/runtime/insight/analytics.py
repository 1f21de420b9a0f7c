"""Workflow analytics computed from the event log (DESIGN §7).

One query reads the events of every instance of a workflow (`AnalyticsRepository`);
each instance's log is replayed through the pure engine (`kernel.evaluate`, as `verify`
does), so every state change is known exactly — automated steps, `$advance`, timers and
assignment completions included — without trusting the current rows. Then, in Python:

- counts: instances started, completed, cancelled, in error, still live;
- cycle time (seconds from the `$start` event to the event that completed the instance):
  p50, p90 and mean over completed instances;
- per state: visits entered, visits left, instances in it now, dwell (seconds from the
  event that entered the state to the event that left it; only visits that left count)
  mean and p50, and SLA compliance for states with `sla_seconds` (of the version the
  instance pinned): a visit is *met* when it left the state by its due time with no
  `$sla` breach event, *breached* when it left late, had a breach event, or is still
  there (or ended by cancel/error) after its due time; visits neither left nor due yet
  are pending and do not count. compliance = met / (met + breached).

Percentiles interpolate linearly between ranks (PostgreSQL's `percentile_cont`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from itertools import groupby
from typing import Any

from stateward.domain.errors import NOT_FOUND, DomainError
from stateward.domain.model import (
    CANCELLED,
    COMPLETED,
    ERROR,
    LIVE_STATUSES,
    Actor,
    Definition,
    ProcessSnapshot,
)
from stateward.persistence.analytics import AnalyticsRepository, LogEvent
from stateward.runtime.core.clock import format_ts
from stateward.runtime.core.kernel import evaluate
from stateward.runtime.core.services import Runtime

SLA = "$sla"
BREACH_KINDS = ("breach", "breached")


@dataclass(frozen=True)
class StateAnalytics:
    """Figures of one state (see the module docstring)."""

    state: str
    entered: int
    left: int
    current: int
    dwell_mean_seconds: float | None
    dwell_p50_seconds: float | None
    sla_seconds: float | None
    sla_met: int
    sla_breached: int
    sla_compliance: float | None


@dataclass(frozen=True)
class WorkflowAnalytics:
    """Figures of a workflow (all versions, or one) as of `as_of` (see the module docstring)."""

    workflow: str
    version: int | None
    as_of: datetime
    started: int
    completed: int
    cancelled: int
    errored: int
    active: int
    cycle_time_p50_seconds: float | None
    cycle_time_p90_seconds: float | None
    cycle_time_mean_seconds: float | None
    states: tuple[StateAnalytics, ...]
    events_read: int = 0
    replay_failures: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (`as_of` as RFC 3339)."""
        out = asdict(self)
        out["as_of"] = format_ts(self.as_of)
        return out


def percentile(values: Sequence[float], q: float) -> float | None:
    """The `q` quantile (0..1) with linear interpolation between ranks; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass
class _StateTally:
    entered: int = 0
    current: int = 0
    dwell: list[float] = field(default_factory=list)
    sla_seconds: float | None = None
    met: int = 0
    breached: int = 0


@dataclass
class _Tally:
    """Running totals over every instance."""

    now: datetime
    started: int = 0
    completed: int = 0
    cancelled: int = 0
    errored: int = 0
    active: int = 0
    failures: int = 0
    cycle: list[float] = field(default_factory=list)
    states: dict[str, _StateTally] = field(default_factory=dict)

    def state(self, key: str) -> _StateTally:
        return self.states.setdefault(key, _StateTally())


@dataclass
class _Visit:
    state: str
    entered: datetime
    sla_seconds: float | None
    breach_event: bool = False

    def close(self, tally: _Tally, at: datetime, *, left: bool) -> None:
        """Record the visit ended at `at` (`left`: by a state change)."""
        figures = tally.state(self.state)
        seconds = (at - self.entered).total_seconds()
        if left:
            figures.dwell.append(seconds)
        if self.sla_seconds is None:
            return
        late = seconds > self.sla_seconds
        if self.breach_event or late:
            figures.breached += 1
        elif left:
            figures.met += 1


async def analytics(
    runtime: Runtime, workflow_path: str, version: int | None = None
) -> WorkflowAnalytics:
    """Analytics of `workflow_path` (every version, or only instances pinned to `version`).

    NOT_FOUND when the path was never deployed (or `version` does not exist). States are
    listed in the order of the version named (else the latest), then states that only
    older versions have.
    """
    async with runtime.uow(readonly=True) as uow:
        current = await uow.workflows.get(workflow_path)
        if current is None:
            raise DomainError(NOT_FOUND, f"workflow {workflow_path} was never deployed")
        shown = version if version is not None else current.latest_version
        log = await AnalyticsRepository(uow.session).instance_log(workflow_path, version)
        definitions: dict[int, Definition] = {}
        for v in sorted({e.version for e in log} | {shown}):
            definitions[v] = await runtime.definition(uow, workflow_path, v)
    tally = _Tally(now=runtime.clock.now())
    for _pid, events in groupby(log, key=lambda e: e.process_id):
        _replay(list(events), definitions, tally)
    return _result(workflow_path, version, definitions[shown], definitions, tally, len(log))


def _replay(events: list[LogEvent], definitions: Mapping[int, Definition], tally: _Tally) -> None:
    """Replay one instance's log and add what it shows to `tally`."""
    definition = definitions[events[0].version]
    snapshot: ProcessSnapshot | None = None
    visit: _Visit | None = None
    started_at = ended_at = events[0].ts
    try:
        for event in events:
            outcome = evaluate(
                definition,
                snapshot,
                name=event.action,
                input=event.input or {},
                actor=Actor(id=event.actor, visitor=event.actor.startswith("visitor:")),
                ts=format_ts(event.ts),
                event_id=event.identity,
                process_id=event.process_id,
                authorize=False,
            )
            if visit is not None and event.action == SLA:
                visit.breach_event |= (event.input or {}).get("kind") in BREACH_KINDS
            if visit is None or outcome.state != visit.state:
                if visit is not None:
                    visit.close(tally, event.ts, left=True)
                state = definition.states.get(outcome.state)
                visit = _Visit(outcome.state, event.ts, state.sla_seconds if state else None)
                tally.state(outcome.state).entered += 1
            if outcome.status in (COMPLETED, CANCELLED, ERROR) and (
                snapshot is None or snapshot.status != outcome.status
            ):
                ended_at = event.ts
            snapshot = ProcessSnapshot(
                id=event.process_id,
                workflow=definition.path or "",
                version=event.version,
                state=outcome.state,
                status=outcome.status,
                data=outcome.data,
                started_by=snapshot.started_by if snapshot else event.actor,
                automation_chain=(snapshot.automation_chain + 1 if snapshot else 1)
                if outcome.action == "$automate"
                else 0,
            )
    except DomainError:
        tally.failures += 1
        return
    assert snapshot is not None and visit is not None
    tally.started += 1
    status = snapshot.status
    if status in LIVE_STATUSES:
        tally.active += 1
        tally.state(visit.state).current += 1
        visit.close(tally, tally.now, left=False)  # breached when overdue, else pending
        return
    if status == COMPLETED:
        tally.completed += 1
        tally.cycle.append((ended_at - started_at).total_seconds())
    elif status == CANCELLED:
        tally.cancelled += 1
    elif status == ERROR:
        tally.errored += 1
    if status != COMPLETED:
        visit.close(tally, ended_at, left=False)


def _state_order(shown: Definition, definitions: Iterable[Definition]) -> list[str]:
    order = list(shown.states)
    for definition in definitions:
        order.extend(k for k in definition.states if k not in order)
    return order


def _result(
    path: str,
    version: int | None,
    shown: Definition,
    definitions: Mapping[int, Definition],
    tally: _Tally,
    events_read: int,
) -> WorkflowAnalytics:
    states = []
    for key in _state_order(shown, definitions.values()):
        t = tally.states.get(key, _StateTally())
        declared = shown.states.get(key)
        sla = declared.sla_seconds if declared is not None else None
        decided = t.met + t.breached
        states.append(
            StateAnalytics(
                state=key,
                entered=t.entered,
                left=len(t.dwell),
                current=t.current,
                dwell_mean_seconds=_mean(t.dwell),
                dwell_p50_seconds=percentile(t.dwell, 0.5),
                sla_seconds=sla,
                sla_met=t.met,
                sla_breached=t.breached,
                sla_compliance=t.met / decided if decided else None,
            )
        )
    return WorkflowAnalytics(
        workflow=path,
        version=version,
        as_of=tally.now,
        started=tally.started,
        completed=tally.completed,
        cancelled=tally.cancelled,
        errored=tally.errored,
        active=tally.active,
        cycle_time_p50_seconds=percentile(tally.cycle, 0.5),
        cycle_time_p90_seconds=percentile(tally.cycle, 0.9),
        cycle_time_mean_seconds=_mean(tally.cycle),
        states=tuple(states),
        events_read=events_read,
        replay_failures=tally.failures,
    )
