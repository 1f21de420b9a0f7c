"""The read side of workflow analytics: the event log of a workflow's instances.

One statement reads every event of every instance of a workflow (optionally of one
pinned version), ordered by instance and seq, with only the columns a replay needs; the
runtime (`runtime/analytics.py`) replays and aggregates them in Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, select

from stateward.persistence.base import Repository
from stateward.persistence.models import Event, Process
from stateward.records import INSTANCE

E = cast(Table, Event.__table__)
P = cast(Table, Process.__table__)


@dataclass(frozen=True)
class LogEvent:
    """One event of an instance, as a replay needs it (plus the instance's pinned version)."""

    process_id: str
    version: int
    seq: int
    action: str
    actor: str
    ts: datetime
    identity: str
    input: Any


class AnalyticsRepository(Repository):
    """Bulk reads of the event log for analytics (never used on the write path)."""

    async def instance_log(self, workflow: str, version: int | None = None) -> list[LogEvent]:
        """Every event of every instance of `workflow` (of `version` when given), ordered
        by instance id and seq (one query)."""
        stmt = (
            select(
                E.c.process_id,
                P.c.workflow_version.label("version"),
                E.c.seq,
                E.c.action,
                E.c.actor,
                E.c.ts,
                E.c.identity,
                E.c.input,
            )
            .join(P, P.c.id == E.c.process_id)
            .where(P.c.workflow == workflow, P.c.kind == INSTANCE)
            .order_by(E.c.process_id, E.c.seq)
        )
        if version is not None:
            stmt = stmt.where(P.c.workflow_version == version)
        return [
            LogEvent(r.process_id, r.version, r.seq, r.action, r.actor, r.ts, r.identity, r.input)
            for r in await self.session.execute(stmt)
        ]
