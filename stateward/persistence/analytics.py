"""Workflow analytics in SQL: the `state_visits` read model and its aggregates.

`VisitRepository` writes the visits on the event path (one row per stay of an instance in a
state, opened by the event that entered it, closed by the one that left it or ended the
instance). `AnalyticsRepository` answers every figure with aggregate queries (COUNT, SUM,
window functions for the percentiles): no instance, event or visit is loaded into Python,
only one row per state, per day or per status comes back. Instants are epoch milliseconds,
so durations are integer subtractions on both databases.

Percentiles interpolate linearly between ranks (PostgreSQL's `percentile_cont`), computed
with `row_number()`/`count()` windows so SQLite gives the same figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, and_, case, func, literal_column, or_, select, update
from sqlalchemy.sql import ColumnElement

from stateward.persistence.base import Repository
from stateward.persistence.models import Process
from stateward.persistence.models_ops import StateVisit
from stateward.records import INSTANCE

V = cast(Table, StateVisit.__table__)
P = cast(Table, Process.__table__)

#: `ended` of a visit the instance is still in, and of one left by a state change.
OPEN = ""
LEFT = "left"
#: The percentiles reported, in percent (integers keep the rank arithmetic exact).
QUANTILES = (50, 90, 99)


class VisitRepository(Repository):
    """Writes of the visits read model (the event path only)."""

    async def open(
        self,
        *,
        process_id: str,
        workflow: str,
        version: int,
        state: str,
        seq: int,
        at_ms: int,
        due_ms: int | None,
    ) -> None:
        """A new visit of `state`, entered at `at_ms` by event `seq`."""
        await self.session.execute(
            V.insert().values(
                process_id=process_id,
                workflow=workflow,
                version=version,
                state=state,
                entered_seq=seq,
                entered_ms=at_ms,
                left_ms=None,
                ended=OPEN,
                due_ms=due_ms,
                breached=False,
            )
        )

    async def close(self, process_id: str, at_ms: int, ended: str, *, breached: bool) -> None:
        """Close the open visit of the process (`ended` says how); `breached` when an SLA
        breach was recorded during it."""
        values: dict[str, Any] = {"left_ms": at_ms, "ended": ended}
        if breached:
            values["breached"] = True
        await self.session.execute(
            update(V).where(V.c.process_id == process_id, V.c.ended == OPEN).values(**values)
        )

    async def last_visited(self, process_id: str, states: Sequence[str]) -> str | None:
        """The most recently entered of `states` the process has been in, or None."""
        if not states:
            return None
        stmt = (
            select(V.c.state)
            .where(V.c.process_id == process_id, V.c.state.in_(list(states)))
            .order_by(V.c.entered_seq.desc(), V.c.id.desc())
            .limit(1)
        )
        found: str | None = (await self.session.execute(stmt)).scalar_one_or_none()
        return found


@dataclass(frozen=True)
class Spread:
    """count, mean and percentiles (QUANTILES order) of durations, in milliseconds."""

    count: int
    mean_ms: float | None
    percentiles_ms: tuple[float | None, ...]


@dataclass(frozen=True)
class StateFigures:
    """Aggregates of one state over the window."""

    state: str
    entered: int
    left: int
    current: int
    dwell: Spread
    sla_met: int
    sla_breached: int


@dataclass(frozen=True)
class Window:
    """Instances of `workflow` (optionally pinned to `version`) over [from_ms, to_ms] (both
    ends included), judged at `now_ms`."""

    workflow: str
    version: int | None
    from_ms: int
    to_ms: int
    now_ms: int


def _empty() -> Spread:
    return Spread(0, None, tuple(None for _ in QUANTILES))


class AnalyticsRepository(Repository):
    """Aggregate reads of the visits read model (never used on the write path)."""

    def _scope(self, w: Window) -> list[ColumnElement[bool]]:
        scope = [V.c.workflow == w.workflow]
        if w.version is not None:
            scope.append(V.c.version == w.version)
        return scope

    async def spreads(
        self, key: ColumnElement[Any], value: ColumnElement[Any], where: list[Any]
    ) -> dict[Any, Spread]:
        """count, mean and interpolated percentiles of `value` per `key` (one query)."""
        values = select(key.label("k"), value.label("v")).where(*where).subquery()
        ranked = select(
            values.c.k,
            values.c.v,
            (func.row_number().over(partition_by=values.c.k, order_by=values.c.v) - 1).label("rn"),
            func.count().over(partition_by=values.c.k).label("n"),
        ).subquery()
        n1 = ranked.c.n - 1
        columns: list[Any] = [
            ranked.c.k,
            func.count().label("total"),
            func.avg(ranked.c.v * literal_column("1.0")).label("mean"),
        ]
        for q in QUANTILES:
            # rank = (n-1)*q/100; low = floor(rank) (integer division: both DBs truncate);
            # the value at low + (value at low+1 - value at low) * frac.
            q_: ColumnElement[Any] = literal_column(str(q))
            low = (n1 * q_).op("/")(literal_column("100"))
            frac = ((n1 * q_) % literal_column("100")) * literal_column("0.01")
            columns.append(
                func.sum(
                    case(
                        (ranked.c.rn == low, ranked.c.v * (literal_column("1") - frac)),
                        (ranked.c.rn == low + 1, ranked.c.v * frac),
                        else_=0,
                    )
                ).label(f"p{q}")
            )
        rows = await self.session.execute(select(*columns).group_by(ranked.c.k))
        return {
            r.k: Spread(
                int(r.total),
                float(r.mean),
                tuple(float(getattr(r, f"p{q}")) for q in QUANTILES),
            )
            for r in rows
        }

    async def states(self, w: Window) -> list[StateFigures]:
        """Per state: visits entered in the window, visits left in it (and their dwell),
        instances in it now, SLA met (left by the due time within the window) and breached
        (due within the window and up to now, then still there, left late or breached)."""
        scope = self._scope(w)
        left_in = and_(V.c.ended == LEFT, V.c.left_ms >= w.from_ms, V.c.left_ms <= w.to_ms)
        due_in = and_(
            V.c.due_ms.is_not(None),
            V.c.due_ms >= w.from_ms,
            V.c.due_ms <= w.to_ms,
            V.c.due_ms <= w.now_ms,
        )
        breached = and_(
            due_in,
            or_(V.c.breached, func.coalesce(V.c.left_ms, w.now_ms) > V.c.due_ms),
            # ended by completion/cancel/error before it was due: never decided
            or_(V.c.ended.in_((OPEN, LEFT)), V.c.left_ms > V.c.due_ms, V.c.breached),
        )
        met = and_(
            left_in, V.c.due_ms.is_not(None), V.c.left_ms <= V.c.due_ms, V.c.breached.is_(False)
        )

        def count(condition: ColumnElement[bool]) -> Any:
            return func.sum(case((condition, 1), else_=0))

        rows = await self.session.execute(
            select(
                V.c.state,
                count(and_(V.c.entered_ms >= w.from_ms, V.c.entered_ms <= w.to_ms)).label(
                    "entered"
                ),
                count(left_in).label("left"),
                count(V.c.ended == OPEN).label("current"),
                count(met).label("met"),
                count(breached).label("breached"),
            )
            .where(*scope)
            .group_by(V.c.state)
        )
        dwell = await self.spreads(V.c.state, V.c.left_ms - V.c.entered_ms, [*scope, left_in])
        return [
            StateFigures(
                state=r.state,
                entered=int(r.entered or 0),
                left=int(r.left or 0),
                current=int(r.current or 0),
                dwell=dwell.get(r.state, _empty()),
                sla_met=int(r.met or 0),
                sla_breached=int(r.breached or 0),
            )
            for r in rows
        ]

    def _completions(self, w: Window) -> list[ColumnElement[bool]]:
        return [
            *self._scope(w),
            V.c.ended == "completed",
            V.c.left_ms >= w.from_ms,
            V.c.left_ms <= w.to_ms,
        ]

    async def cycle_time(self, w: Window) -> Spread:
        """Start to completion of the instances completed in the window (the start is the
        instance's first visit, entered by its `$start`)."""
        start = V.alias("start")
        found = await self.spreads(
            literal_column("1"),
            V.c.left_ms - start.c.entered_ms,
            [
                *self._completions(w),
                start.c.process_id == V.c.process_id,
                start.c.entered_seq == 1,
            ],
        )
        return next(iter(found.values()), _empty())

    async def completions_per_day(self, w: Window) -> dict[int, int]:
        """Instances completed per UTC day (days since the epoch) in the window."""
        day = V.c.left_ms.op("/")(literal_column("86400000"))
        rows = await self.session.execute(
            select(day.label("day"), func.count().label("n"))
            .where(*self._completions(w))
            .group_by(day)
        )
        return {int(r.day): int(r.n) for r in rows}

    async def status_counts(
        self, workflow: str, version: int | None, from_ms: int, to_ms: int
    ) -> dict[str, int]:
        """Instances started in the window, by their status now."""
        start = V.alias("start")
        scope = [
            start.c.workflow == workflow,
            start.c.entered_seq == 1,
            start.c.entered_ms >= from_ms,
            start.c.entered_ms <= to_ms,
        ]
        if version is not None:
            scope.append(start.c.version == version)
        rows = await self.session.execute(
            select(P.c.status, func.count().label("n"))
            .join(start, start.c.process_id == P.c.id)
            .where(P.c.kind == INSTANCE, *scope)
            .group_by(P.c.status)
        )
        return {r.status: int(r.n) for r in rows}
