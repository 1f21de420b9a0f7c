"""Small helpers shared by the kernel operations of the runtime services (§7).

`system_act` appends a server-attested event of the `system` actor (SLA marks, timers,
staleness, automation) through `act`, the one path. The `require_*` checks and
`with_team` are what every kernel operation handler needs around `apply_engine`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from stateward.domain.errors import FORBIDDEN, INVALID_INPUT, NOT_FOUND, DomainError
from stateward.domain.model import LIVE_STATUSES, SYSTEM_ACTOR, Outcome
from stateward.persistence import UnitOfWork
from stateward.persistence.kernel import KernelRepository
from stateward.records import INSTANCE, ProcessRecord
from stateward.runtime.core.act import ActResult, act
from stateward.runtime.core.commands import attest
from stateward.runtime.core.kernel import ActContext
from stateward.runtime.core.services import Runtime

T = TypeVar("T")

#: The code a sweep gets when its candidate no longer needs the event (someone else
#: fired it first, or the process moved on): skipped, never retried as an error.
NOT_DUE = "CONFLICT"


def kernel_repo(uow: UnitOfWork) -> KernelRepository:
    """The kernel services' repository on `uow`'s session."""
    return KernelRepository(uow.session)


async def system_act(
    runtime: Runtime, process_id: str, workflow: str, name: str, input: Mapping[str, Any]
) -> ActResult:
    """Append the kernel operation `name` by the `system` actor (attested by the node key)
    to the process `process_id` running `workflow`."""
    signed = attest(runtime, SYSTEM_ACTOR, process_id, name, workflow, input)
    return await act(runtime, signed, attested=True)


def require_instance(ctx: ActContext) -> ProcessRecord:
    """The instance the event targets (NOT_FOUND before `$start` or for a registry)."""
    if ctx.process is None or ctx.process.kind != INSTANCE:
        raise DomainError(NOT_FOUND, f"instance {ctx.envelope.process} does not exist")
    return ctx.process


def require_live(process: ProcessRecord) -> None:
    """INACTIVE_PROCESS unless the process is active or stale."""
    if process.status not in LIVE_STATUSES:
        raise DomainError("INACTIVE_PROCESS", f"process {process.id} is {process.status}")


def require_system(ctx: ActContext) -> None:
    """FORBIDDEN unless the event's actor is the engine itself."""
    if not ctx.actor.is_system:
        raise DomainError(FORBIDDEN, f"{ctx.envelope.action.name} is a system operation")


def input_str(ctx: ActContext, key: str) -> str:
    """A required string field of the event's input (INVALID_INPUT when missing)."""
    value = ctx.input.get(key)
    if not isinstance(value, str) or not value:
        raise DomainError(INVALID_INPUT, f"{ctx.envelope.action.name} needs {key!r}",
                          pointer=f"/{key}")  # fmt: skip
    return value


def not_due(message: str) -> DomainError:
    """The error of a sweep event whose reason vanished (see `NOT_DUE`)."""
    return DomainError(NOT_DUE, message, details={"reason": "not_due"})


def with_team(
    outcome: Outcome, team: str | None, types: Collection[str] | None = None, **details: Any
) -> Outcome:
    """`outcome` with `team` (where missing) and `details` added to its domain events of
    `types` (all when None): row-only kernel events carry no team, but queue subscribers
    filter on it."""
    events = tuple(
        replace(e, team=e.team or team, details={**e.details, **details})
        if types is None or e.type in types
        else e
        for e in outcome.events
    )
    return replace(outcome, events=events)


def actor_id(actor: Any) -> str:
    """The actor id of an id string or of a viewer-like object (its `id`)."""
    if isinstance(actor, str):
        return actor
    value = getattr(actor, "id", None)
    if not isinstance(value, str):
        raise DomainError("UNAUTHENTICATED", "no actor")
    return value


def is_not_due(error: DomainError) -> bool:
    """True for the error of `not_due` (a sweep skips such candidates silently)."""
    return error.code == NOT_DUE and error.details.get("reason") == "not_due"


async def drain(
    fetch: Callable[[int], Awaitable[Sequence[T]]],
    key: Callable[[T], Hashable],
    handle: Callable[[T], Awaitable[bool]],
    batch: int,
) -> None:
    """Page a sweep through its candidates: `fetch(limit)` reads up to `limit` of them
    (first `batch`, then `batch` more for every one skipped), `handle` each one not
    skipped yet — False skips it (it stays a candidate but is not retried by this call)
    — until a page comes back short or holds nothing new. Candidates that were handled
    leave the fetched range, so the loop ends."""
    skipped: set[Hashable] = set()
    while True:
        limit = batch + len(skipped)
        due = await fetch(limit)
        fresh = [c for c in due if key(c) not in skipped]
        for candidate in fresh:
            if not await handle(candidate):
                skipped.add(key(candidate))
        if len(due) < limit or not fresh:
            break
