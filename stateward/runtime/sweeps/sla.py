"""SLA scanner (DESIGN §7): warnings at 80 % (DSL 2.1: the state's `sla_warning`),
breaches at 100 %, each exactly once.

The core stores `sla_warn_at`/`sla_due_at` when a state with `sla_seconds` is entered
(and clears the fired marks). `scan` finds due deadlines with an indexed range query over
the pending-only partial indexes and appends one `$sla` system event per mark through
`act`. The `$sla` operation re-checks the deadline inside the event's transaction (the
process row is locked / the write lock held) and sets the fired mark with a conditional
update, so with any number of scanners on one database each mark fires exactly once;
a scanner that lost simply skips. A breach also notifies the assignee (or the team) and
queues a webhook delivery, in the same transaction; a warning notifies too, unless the
state says `sla_warning_notify: false`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stateward.domain import events as ev
from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.model import LIVE_STATUSES, Outcome
from stateward.persistence.kernel import BREACH, WARNING, SlaCandidate
from stateward.records import ProcessRecord, StoredEvent
from stateward.runtime.core.clock import format_ts, parse_ts
from stateward.runtime.core.kernel import ActContext, apply_engine
from stateward.runtime.core.ops_support import (
    drain,
    input_str,
    is_not_due,
    kernel_repo,
    not_due,
    require_instance,
    require_system,
    system_act,
    with_team,
)
from stateward.runtime.core.services import Runtime
from stateward.runtime.sweeps.notifications import notify, recipient_for
from stateward.runtime.sweeps.webhooks import enqueue

log = logging.getLogger(__name__)

SLA = "$sla"
KINDS = (WARNING, BREACH)
BATCH = 100


@dataclass
class SlaReport:
    """What one scan fired: process ids per kind."""

    warnings: list[str] = field(default_factory=list)
    breaches: list[str] = field(default_factory=list)

    @property
    def fired(self) -> int:
        """How many marks this scan fired."""
        return len(self.warnings) + len(self.breaches)


def _deadline_of(process: ProcessRecord, kind: str) -> tuple[datetime | None, datetime | None]:
    if kind == WARNING:
        return process.sla_warn_at, process.sla_warned_at
    return process.sla_due_at, process.sla_breached_at


async def op_sla(ctx: ActContext) -> Outcome:
    """`$sla {kind, state, deadline}` (system): fire an SLA mark that is still pending for
    this very deadline of this state entry; anything else is `not_due` (skipped)."""
    require_system(ctx)
    process = require_instance(ctx)
    kind, state = input_str(ctx, "kind"), input_str(ctx, "state")
    if kind not in KINDS:
        raise DomainError(INVALID_INPUT, "$sla kind must be warning or breach", pointer="/kind")
    deadline, fired = _deadline_of(process, kind)
    wanted = input_str(ctx, "deadline")
    if (
        process.status not in LIVE_STATUSES
        or process.state != state
        or deadline is None
        or fired is not None
        or format_ts(deadline) != format_ts(parse_ts(wanted))
        or deadline > ctx.now
    ):
        raise not_due(f"SLA {kind} of {process.id} is not pending for {state}@{wanted}")
    state_def = ctx.definition.states.get(state)
    team = state_def.assign if state_def is not None else None
    assignee = ctx.claimed_by
    outcome = apply_engine(ctx)
    details: dict[str, Any] = {"kind": kind, "deadline": format_ts(deadline)}
    if assignee:
        details["assignee"] = assignee

    async def mark(event: StoredEvent) -> None:
        if not await kernel_repo(ctx.uow).mark_sla(
            process.id, kind, ctx.now, process.last_event_at
        ):
            raise not_due(f"SLA {kind} of {process.id} fired concurrently")
        if kind == BREACH:
            await _on_breach(ctx, process, event, team, assignee, deadline)
        elif state_def is not None and state_def.sla_warning_notify:
            await _on_warning(ctx, process, event, team, assignee, deadline)

    ctx.after_event.append(mark)
    return with_team(outcome, team, **details)


async def _on_warning(
    ctx: ActContext,
    process: ProcessRecord,
    event: StoredEvent,
    team: str | None,
    assignee: str | None,
    deadline: datetime,
) -> None:
    """A warning notifies the assignee (else the team), like a breach but without the
    webhook; a state opts out with `sla_warning_notify: false` (DSL 2.1)."""
    due = format_ts(process.sla_due_at) if process.sla_due_at else None
    body = _body(ev.SLA_WARNING, ctx, process, event, team, assignee,
                 warnAt=format_ts(deadline), dueAt=due)  # fmt: skip
    recipient = recipient_for(assignee, team or None, process.started_by)
    if recipient is not None:
        await notify(ctx.uow, recipient, process.namespace, ev.SLA_WARNING, body, ctx.now,
                     process.id)  # fmt: skip


def _body(
    kind: str,
    ctx: ActContext,
    process: ProcessRecord,
    event: StoredEvent,
    team: str | None,
    assignee: str | None,
    **deadlines: str | None,
) -> dict[str, Any]:
    """The notification body of an SLA mark: the instance, who holds it, its deadlines."""
    return {
        "type": kind,
        "at": ctx.envelope.ts,
        "namespace": process.namespace,
        "workflow": process.workflow,
        "version": process.workflow_version,
        "instanceId": process.id,
        "state": process.state,
        "team": team,
        "assignee": assignee,
        **deadlines,
        "seq": event.seq,
    }


async def _on_breach(
    ctx: ActContext,
    process: ProcessRecord,
    event: StoredEvent,
    team: str | None,
    assignee: str | None,
    deadline: datetime,
) -> None:
    """A breach notifies the assignee (else the team) and queues the workflow's own webhook,
    else the namespace's."""
    body = _body(ev.SLA_BREACHED, ctx, process, event, team, assignee,
                 dueAt=format_ts(deadline))  # fmt: skip
    recipient = recipient_for(assignee, team, process.started_by)
    if recipient is not None:
        await notify(ctx.uow, recipient, process.namespace, ev.SLA_BREACHED, body, ctx.now,
                     process.id)  # fmt: skip
    await enqueue(ctx.uow, process.namespace, ev.SLA_BREACHED, body, ctx.now,
                  workflow=process.workflow, process_id=process.id)  # fmt: skip


async def scan(runtime: Runtime, now: datetime | None = None, *, batch: int = BATCH) -> SlaReport:
    """Fire every SLA warning and breach due at `now` (default: the runtime's clock) that
    no scanner fired yet; returns what THIS call fired."""
    now = now or runtime.clock.now()
    report = SlaReport()
    for kind in KINDS:
        fired = report.warnings if kind == WARNING else report.breaches
        await _scan_kind(runtime, kind, now, batch, fired)
    return report


async def _scan_kind(
    runtime: Runtime, kind: str, now: datetime, batch: int, fired: list[str]
) -> None:
    """Fire the due marks of one kind, appending the process ids fired to `fired`."""

    async def fetch(limit: int) -> list[SlaCandidate]:
        async with runtime.uow(readonly=True) as uow:
            return await kernel_repo(uow).due_sla(kind, now, limit)

    async def handle(candidate: SlaCandidate) -> bool:
        if not await _fire(runtime, candidate):
            return False
        fired.append(candidate.process_id)
        return True

    await drain(fetch, lambda c: c.process_id, handle, batch)


async def _fire(runtime: Runtime, c: SlaCandidate) -> bool:
    """Append the `$sla` event of one candidate; False when it was not (or no longer) due."""
    input = {"kind": c.kind, "state": c.state, "deadline": format_ts(c.deadline)}
    try:
        await system_act(runtime, c.process_id, c.workflow, SLA, input)
    except DomainError as error:
        if not is_not_due(error):
            log.warning("SLA %s of %s not fired: %s %s", c.kind, c.process_id, error.code,
                        error.message)  # fmt: skip
        return False
    return True
