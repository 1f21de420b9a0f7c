"""Timers (DESIGN §7): due `schedules` rows fire their action as `system`, exactly once.

`fire_due` reads the pending timers due now and appends one `$timer` event each through
`act`. The `$timer` operation re-checks the row inside the event's transaction and closes
it pending -> fired with a conditional update, so across nodes (and after a restart: the
rows are the state) each timer fires once. When the engine refuses the action because
the instance moved on (`domain.incidents.TIMER_OVERTAKEN`: it left the state, a guard
is false, it completed...) nothing is written for the event and the timer is closed
`not_applicable` with the reason: recorded once, never retried. Any other refusal (a
form, a `then`, a mutation...) is a FAILURE (issue 15): a second `$timer` event with
`failed: "<CODE>: <message>"` records it through the same path, puts the instance in
`error`, closes the timer `failed` and opens a TIMER_FAILED incident (which
`retryIncident` / `resolveIncident` end).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stateward.domain.errors import CONFLICT, INVALID_INPUT, NOT_FOUND, DomainError
from stateward.domain.incidents import TIMER, TIMER_OVERTAKEN
from stateward.domain.model import Outcome
from stateward.persistence.schedules import FAILED, FIRED, NOT_APPLICABLE, PENDING
from stateward.records import ScheduleRecord
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
)
from stateward.runtime.core.services import Runtime

log = logging.getLogger(__name__)

BATCH = 100


@dataclass
class TimerReport:
    """What one `fire_due` did: timer ids fired, failed (an incident) and closed as not
    applicable."""

    fired: list[int] = field(default_factory=list)
    not_applicable: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


async def op_timer(ctx: ActContext) -> Outcome:
    """`$timer {schedule, action, key?, input?, failed?}` (system): perform the timer's
    action and close the timer as fired, in this one event; with `failed`, record that the
    action failed (the instance goes to `error`) and close the timer as failed."""
    require_system(ctx)
    process = require_instance(ctx)
    schedule_id = ctx.input.get("schedule")
    if not isinstance(schedule_id, int) or isinstance(schedule_id, bool):
        raise DomainError(INVALID_INPUT, "$timer needs the schedule id", pointer="/schedule")
    repo = kernel_repo(ctx.uow)
    timer = await repo.schedule(schedule_id)
    if timer is None or timer.process_id != process.id:
        raise DomainError(NOT_FOUND, f"timer {schedule_id} of {process.id} does not exist")
    if timer.status != PENDING or timer.due_at > ctx.now:
        raise not_due(f"timer {schedule_id} is {timer.status}, due {timer.due_at.isoformat()}")
    if input_str(ctx, "action") != timer.action:
        raise DomainError(INVALID_INPUT, f"timer {schedule_id} fires {timer.action!r}",
                          pointer="/action")  # fmt: skip
    outcome = apply_engine(ctx)
    failed = ctx.input.get("failed")
    status, detail = (FAILED, str(failed)[:2000]) if failed is not None else (FIRED, None)
    if not await repo.close_schedule(
        schedule_id, status, ctx.now, ctx.runtime.node_public, detail=detail
    ):
        raise not_due(f"timer {schedule_id} fired concurrently")
    return outcome


async def fire_due(
    runtime: Runtime, now: datetime | None = None, *, batch: int = BATCH
) -> TimerReport:
    """Fire every pending timer due at `now` (default: the runtime's clock); returns what
    THIS call fired or closed."""
    at = now or runtime.clock.now()
    report = TimerReport()

    async def fetch(limit: int) -> list[tuple[ScheduleRecord, str | None]]:
        async with runtime.uow(readonly=True) as uow:
            due = await kernel_repo(uow).due_schedules(at, limit)
            workflows = {
                p.id: p.workflow
                for p in (await uow.processes.processes_by_ids(t.process_id for t in due)).values()
            }
        return [(t, workflows.get(t.process_id)) for t in due]

    async def handle(item: tuple[ScheduleRecord, str | None]) -> bool:
        timer, workflow = item
        outcome = await _fire(runtime, timer, workflow, at)
        if outcome == FIRED:
            report.fired.append(timer.id)
        elif outcome == NOT_APPLICABLE:
            report.not_applicable.append(timer.id)
        elif outcome == FAILED:
            report.failed.append(timer.id)
        return bool(outcome)

    await drain(fetch, lambda item: item[0].id, handle, batch)
    return report


async def _fire(
    runtime: Runtime, timer: ScheduleRecord, workflow: str | None, now: datetime
) -> str:
    """Fire one timer: FIRED, FAILED (an incident), NOT_APPLICABLE (recorded with the
    reason) or '' (skipped)."""
    if workflow is None:
        return await _not_applicable(runtime, timer, now, "NOT_FOUND: the process is gone")
    input = {"schedule": timer.id, "action": timer.action}
    if timer.key is not None:
        input["key"] = timer.key
    try:
        await system_act(runtime, timer.process_id, workflow, TIMER, input)
    except DomainError as error:
        if is_not_due(error):
            return ""
        if error.code == CONFLICT:  # transient (lost every retry): try again next tick
            log.warning("timer %s not fired: %s", timer.id, error.message)
            return ""
        why = f"{error.code}: {error.message}"
        if error.code in TIMER_OVERTAKEN:
            return await _not_applicable(runtime, timer, now, why)
        return await _failed(runtime, timer, workflow, now, {**input, "failed": why[:2000]})
    return FIRED


async def _failed(
    runtime: Runtime, timer: ScheduleRecord, workflow: str, now: datetime, input: dict[str, Any]
) -> str:
    """Record the failure of the timer's action with a `$timer {failed}` event (issue 15):
    the instance goes to `error` and a TIMER_FAILED incident opens, in that one event."""
    try:
        await system_act(runtime, timer.process_id, workflow, TIMER, input)
    except DomainError as error:
        if is_not_due(error) or error.code == CONFLICT:  # raced: the next tick decides
            return ""
        log.warning("timer %s failure not recorded: %s", timer.id, error.message)
        return await _not_applicable(runtime, timer, now, str(input["failed"]))
    return FAILED


async def _not_applicable(runtime: Runtime, timer: ScheduleRecord, now: datetime, why: str) -> str:
    """Close the timer as not applicable with the reason (once: a conditional update)."""
    async with runtime.uow() as uow:
        won = await kernel_repo(uow).close_schedule(
            timer.id, NOT_APPLICABLE, now, runtime.node_public, detail=why[:2000]
        )
        await uow.commit()
    return NOT_APPLICABLE if won else ""
