"""Staleness sweep (DESIGN §7): active instances idle for `stale_after` become `stale`.

`sweep` finds active instances whose last event is older than `now - stale_after`
(index on (status, last_event_at)) and appends a `$stale` system event to each through
`act`; the engine sets status `stale` and emits `workflow.stale`. The operation re-checks
idleness inside the event's transaction, so an instance someone just acted on is left
alone and concurrent sweepers mark each instance once. Acting on a stale instance
re-activates it (engine rule).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from stateward.domain.errors import DomainError
from stateward.domain.model import ACTIVE, Outcome
from stateward.records import ProcessRecord
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
)
from stateward.runtime.core.services import Runtime

log = logging.getLogger(__name__)

STALE = "$stale"
BATCH = 100


async def op_stale(ctx: ActContext) -> Outcome:
    """`$stale {cutoff}` (system): mark an active instance with no event since `cutoff`."""
    require_system(ctx)
    process = require_instance(ctx)
    cutoff = parse_ts(input_str(ctx, "cutoff"))
    if process.status != ACTIVE or process.last_event_at >= cutoff or cutoff > ctx.now:
        raise not_due(f"{process.id} is {process.status}, last event {process.last_event_at}")
    return apply_engine(ctx)


async def sweep(runtime: Runtime, now: datetime | None = None, *, batch: int = BATCH) -> list[str]:
    """Mark every instance idle for `settings.stale_after` at `now` stale; returns the ids
    THIS call marked."""
    now = now or runtime.clock.now()
    cutoff = now - timedelta(seconds=runtime.settings.stale_after)
    marked: list[str] = []

    async def fetch(limit: int) -> list[tuple[str, ProcessRecord | None]]:
        async with runtime.uow(readonly=True) as uow:
            idle = await kernel_repo(uow).idle_instances(cutoff, limit)
            records = await uow.processes.processes_by_ids(idle)
        return [(pid, records.get(pid)) for pid in idle]

    async def handle(item: tuple[str, ProcessRecord | None]) -> bool:
        pid, record = item
        if record is None:  # gone since it was listed: nothing to mark
            return False
        try:
            await system_act(runtime, pid, record.workflow, STALE,
                             {"cutoff": format_ts(cutoff)})  # fmt: skip
        except DomainError as error:
            if not is_not_due(error):
                log.warning("%s not marked stale: %s %s", pid, error.code, error.message)
            return False
        marked.append(pid)
        return True

    await drain(fetch, lambda item: item[0], handle, batch)
    return marked
