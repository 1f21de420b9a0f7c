"""Incidents in the write path (issue 15): the read model of failures that stop instances.

Run by `writes.write_event` inside the event's transaction, so no second write path
exists: the incident rows follow the events exactly, whoever wrote them (a hook's
`$automate`, a timer, an operator's `$retry` / `$resolve` / `$cancel`, a batch).

- An event that moves an instance INTO status `error` opens an incident (id derived from
  the event, kind from `domain.incidents.kind_of`, attempts 1) and stages
  `incident.created`; when the instance already has an open incident (its hook failed
  again after a `$retry`), the same incident counts one more attempt instead.
- `$retry` leaves the incident open (the re-run is on its way).
- Any later event that leaves the instance out of `error` for good resolves it and stages
  `incident.resolved`: the re-run's `$automate` that advanced (`retried`), a `$resolve`
  (`action:<name>` or `cancelled`), a `$cancel` (`cancelled`). Events that change only
  rows on an errored instance (an SLA mark) leave the incident as it is.
- A `$retry {timer}` performs the failed timer's action in the event itself: a success
  resolves the incident (`retried`), a new failure counts one more attempt.
- Webhook incidents (WEBHOOK_EXHAUSTED) are tied to their delivery, not to the status:
  a `$webhook {delivery, outcome: exhausted}` opens one (or, after a `$retry {delivery}`,
  counts the new attempts on it), `$webhook {outcome: delivered}` resolves it
  (`delivered`), `$resolve {delivery, action: $cancel}` resolves it (`cancelled`). The
  instance's own events never touch them (and they never block it).
"""

from __future__ import annotations

import uuid
from typing import Any

from stateward.domain import events as ev
from stateward.domain.incidents import (
    MAX_MESSAGE,
    RESOLVE,
    RETRY,
    WEBHOOK,
    WEBHOOK_EXHAUSTED,
    error_reason,
    kind_of,
)
from stateward.domain.model import CANCELLED, ERROR, DomainEvent, Outcome
from stateward.records import IncidentRecord, ProcessRecord
from stateward.runtime.core.kernel import ActContext

INCIDENT_NAMESPACE = uuid.NAMESPACE_URL
AUTOMATE = "$automate"


def incident_id(identity: str) -> str:
    """The id of the incident an event opens (deterministic: a replay gives the same)."""
    return str(uuid.uuid5(INCIDENT_NAMESPACE, f"stateward:incident:{identity}"))


async def track(ctx: ActContext, outcome: Outcome, record: ProcessRecord) -> list[DomainEvent]:
    """Open, recount or resolve the instance's incident after this event (see above);
    returns the bus events to publish with the event (`incident.created` / `.resolved`)."""
    old = ctx.process
    name = ctx.envelope.action.name
    repo = ctx.uow.incidents
    if name in (WEBHOOK, RETRY, RESOLVE) and "delivery" in ctx.input:
        return await _track_delivery(ctx, name, record)
    if name == RETRY and "timer" in ctx.input and outcome.status == ERROR:
        open_one = await repo.open_for(record.id)  # the timer's action failed again
        if open_one is not None:
            reason = error_reason(outcome)[:MAX_MESSAGE] or open_one.message
            await repo.recount(open_one.id, reason, record.state, 1)
        return []
    entered_error = outcome.status == ERROR and (old is None or old.status != ERROR)
    if entered_error:
        reason = error_reason(outcome)[:MAX_MESSAGE] or "the instance is in error"
        open_one = await repo.open_for(record.id) if old is not None else None
        incident = await _open_or_recount(
            ctx, record, open_one, kind_of(name, ctx.input, reason), reason, None
        )
        return [] if incident is None else [_event(ev.INCIDENT_CREATED, incident, record, {})]
    if old is None or outcome.status == ERROR or (name == RETRY and "timer" not in ctx.input):
        return []
    ends = old.status == ERROR or name == AUTOMATE or outcome.state_changed
    if not ends and outcome.status != CANCELLED:
        return []
    open_one = await repo.open_for(record.id)
    if open_one is None:
        return []
    resolution = _resolution(name, ctx.input, outcome)
    await repo.resolve(open_one.id, ctx.now, record.seq, resolution)
    return [_event(ev.INCIDENT_RESOLVED, open_one, record, {"resolution": resolution})]


async def _open_or_recount(
    ctx: ActContext, record: ProcessRecord, open_one: IncidentRecord | None, kind: str,
    reason: str, delivery: int | None,
) -> IncidentRecord | None:  # fmt: skip
    """Count this failure's runs (`input.attempts`: a state's `retries` or a delivery's
    tries, else 1) on the incident already open, or open a new one and return it."""
    runs = ctx.input.get("attempts")
    runs = runs if isinstance(runs, int) and not isinstance(runs, bool) and runs > 0 else 1
    if open_one is not None:
        await ctx.uow.incidents.recount(open_one.id, reason, record.state, runs)
        return None
    incident = IncidentRecord(
        id=incident_id(ctx.identity),
        process_id=record.id,
        namespace=record.namespace,
        workflow=record.workflow,
        kind=kind,
        state=record.state,
        message=reason,
        attempts=runs,
        opened_seq=record.seq,
        created_at=ctx.now,
        delivery_id=delivery,
    )
    await ctx.uow.incidents.add(incident)
    return incident


def _resolution(name: str, input: Any, outcome: Outcome) -> str:
    """How the incident ended: `cancelled`, `action:<name>` or `retried`."""
    if outcome.status == CANCELLED:
        return "cancelled"
    if name == RESOLVE:
        return f"action:{input.get('action')}"
    if name in (AUTOMATE, RETRY):
        return "retried"
    return f"action:{outcome.action}"


async def _track_delivery(ctx: ActContext, name: str, record: ProcessRecord) -> list[DomainEvent]:
    """The webhook incident of `ctx.input["delivery"]` (see the module docstring)."""
    repo = ctx.uow.incidents
    delivery = int(ctx.input["delivery"])
    open_one = await repo.open_for_delivery(delivery)
    if name == RETRY:
        return []
    if name == WEBHOOK and ctx.input.get("outcome") == "exhausted":
        reason = webhook_reason(ctx.input)
        incident = await _open_or_recount(
            ctx, record, open_one, WEBHOOK_EXHAUSTED, reason, delivery
        )
        if incident is None:
            return []
        return [_event(ev.INCIDENT_CREATED, incident, record, {"delivery": delivery})]
    if open_one is None:
        return []
    resolution = "delivered" if name == WEBHOOK else "cancelled"
    await repo.resolve(open_one.id, ctx.now, record.seq, resolution)
    extra = {"resolution": resolution, "delivery": delivery}
    return [_event(ev.INCIDENT_RESOLVED, open_one, record, extra)]


def webhook_reason(input: Any) -> str:
    """The message of a webhook incident: which event, how often, the last error."""
    event = input.get("event") or "webhook"
    error = input.get("error") or "failed"
    attempts = input.get("attempts")
    return (
        f"webhook delivery {input.get('delivery')} ({event}) failed after {attempts} "
        f"attempts: {error}"
    )[:MAX_MESSAGE]


def _event(
    type_: str, incident: IncidentRecord, record: ProcessRecord, extra: dict[str, Any]
) -> DomainEvent:
    """The domain event of an incident's bus message (details name it; never the data)."""
    details = {
        "incident": incident.id,
        "kind": incident.kind,
        "attempts": incident.attempts,
        "message": incident.message[:500],
        **extra,
    }
    return DomainEvent(type_, incident.state, record.state, None, details)
