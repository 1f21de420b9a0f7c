"""Review-queue assignments (DESIGN §7): claim, unclaim, complete, cancel, queues.

An assignment is opened by the core when an instance enters a state with `assign` and
cancelled when it leaves it. Every change of an assignment is an event of its instance
(`$claim`, `$unclaim`, `$complete`, `$assignment_cancel`), written through `act`; the
kernel operations below check the assignment and change its row with a conditional
UPDATE inside the event's transaction, so of concurrent claimers exactly one wins and
the others get `ALREADY_CLAIMED`. `$complete` records the review and performs the action
(or advances) in the same event. Queues are read straight from the rows.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from stateward.domain import events as ev
from stateward.domain.access import ADMIN_ROLE, has_role
from stateward.domain.errors import (
    ALREADY_CLAIMED,
    FORBIDDEN,
    INVALID_INPUT,
    NOT_FOUND,
    WRONG_STATE,
    DomainError,
)
from stateward.domain.model import Outcome
from stateward.domain.paths import SYSTEM_NAMESPACE
from stateward.domain.search import AssignmentSearch, Ordering
from stateward.persistence.assignments import CANCELLED, CLAIMED, COMPLETED, UNASSIGNED
from stateward.persistence.search import AssignmentScope
from stateward.records import AssignmentRecord
from stateward.runtime.core.act import act
from stateward.runtime.core.commands import attest
from stateward.runtime.core.kernel import ActContext, apply_engine
from stateward.runtime.core.ops_support import (
    actor_id,
    input_str,
    kernel_repo,
    require_instance,
    require_live,
    system_act,
    with_team,
)
from stateward.runtime.core.policy import actor_may_read, not_found
from stateward.runtime.core.services import Runtime

log = logging.getLogger(__name__)

CLAIM = "$claim"
UNCLAIM = "$unclaim"
COMPLETE = "$complete"
ASSIGNMENT_CANCEL = "$assignment_cancel"
STATUSES = (UNASSIGNED, CLAIMED, COMPLETED, CANCELLED)
DEFAULT_FIRST = 20
MAX_FIRST = 100


# --- kernel operations ------------------------------------------------------------------


async def _assignment(ctx: ActContext) -> AssignmentRecord:
    """The assignment the event names; it must belong to the event's live instance."""
    process = require_instance(ctx)
    aid = input_str(ctx, "assignment")
    found = await ctx.uow.assignments.get(aid)
    if found is None or found.process_id != process.id:
        raise DomainError(NOT_FOUND, f"assignment {aid} of {process.id} does not exist")
    require_live(process)
    return found


def _require_open(a: AssignmentRecord) -> None:
    if a.status not in (UNASSIGNED, CLAIMED):
        raise DomainError(WRONG_STATE, f"assignment {a.id} is {a.status}",
                          details={"status": a.status})  # fmt: skip


async def op_claim(ctx: ActContext) -> Outcome:
    """`$claim {assignment}`: an unassigned assignment becomes the actor's (team role,
    `admin`, or one of its candidate users)."""
    a = await _assignment(ctx)
    _require_open(a)
    if a.status == CLAIMED:
        raise DomainError(ALREADY_CLAIMED, f"assignment {a.id} is claimed by {a.assignee}")
    candidate = ctx.actor.id in (a.candidate_users or ())
    if not (candidate or has_role(ctx.actor, a.team.lower()) or has_role(ctx.actor, ADMIN_ROLE)):
        raise DomainError(FORBIDDEN, f"claiming needs the role {a.team!r} or a candidacy")
    outcome = apply_engine(ctx)
    if not await ctx.uow.assignments.claim_assignment(a.id, ctx.actor.id, ctx.now):
        raise DomainError(ALREADY_CLAIMED, f"assignment {a.id} was claimed concurrently")
    return with_team(outcome, a.team, assignee=ctx.actor.id)


async def op_unclaim(ctx: ActContext) -> Outcome:
    """`$unclaim {assignment, reason?}`: back to the queue, by the assignee, an admin or
    the system (which releases the claims of an assignee whose role was revoked)."""
    a = await _assignment(ctx)
    if a.status != CLAIMED:
        raise DomainError(WRONG_STATE, f"assignment {a.id} is {a.status}, not claimed")
    if a.assignee != ctx.actor.id and not (ctx.actor.is_system or has_role(ctx.actor, ADMIN_ROLE)):
        raise DomainError(FORBIDDEN, "only the assignee or an admin may unclaim")
    outcome = apply_engine(ctx)
    if not await ctx.uow.assignments.unclaim(a.id, a.assignee):
        raise DomainError(WRONG_STATE, f"assignment {a.id} changed concurrently")
    return with_team(outcome, a.team, assignee=a.assignee)


async def op_assignment_cancel(ctx: ActContext) -> Outcome:
    """`$assignment_cancel {assignment}`: an admin closes an open assignment."""
    a = await _assignment(ctx)
    _require_open(a)
    if not (ctx.actor.is_system or has_role(ctx.actor, ADMIN_ROLE)):
        raise DomainError(FORBIDDEN, "only an admin may cancel an assignment")
    outcome = apply_engine(ctx)
    if not await ctx.uow.assignments.cancel(a.id, ctx.now):
        raise DomainError(WRONG_STATE, f"assignment {a.id} changed concurrently")
    return with_team(outcome, a.team)


async def op_complete(ctx: ActContext) -> Outcome:
    """`$complete {assignment, reviewData, action?, input?}`: the assignee records the
    review and performs `action` (or advances) on the instance, in this one event."""
    a = await _assignment(ctx)
    _require_open(a)
    if a.status != CLAIMED or a.assignee != ctx.actor.id:
        raise DomainError(FORBIDDEN, f"only the assignee completes assignment {a.id}; claim it")
    if a.state != ctx.process.state:  # type: ignore[union-attr]
        raise DomainError(WRONG_STATE, f"assignment {a.id} belongs to state {a.state!r}")
    outcome = apply_engine(ctx)
    review = ctx.input.get("reviewData")
    if not await ctx.uow.assignments.complete(a.id, ctx.actor.id, review, ctx.now):
        raise DomainError(WRONG_STATE, f"assignment {a.id} changed concurrently")
    if not await ctx.uow.assignments.open_for_process(a.process_id):
        # Leaving the state closes nothing more: the assignment completed, not cancelled.
        events = tuple(e for e in outcome.events if e.type != ev.ASSIGNMENT_CANCELLED)
        outcome = Outcome(outcome.action, outcome.from_state, outcome.state, outcome.status,
                          outcome.data, outcome.effects, events)  # fmt: skip
    return with_team(outcome, a.team, (ev.ASSIGNMENT_COMPLETED,), assignment=a.id)


# --- services -----------------------------------------------------------------------------


async def _load(runtime: Runtime, assignment_id: str, actor: str) -> tuple[AssignmentRecord, str]:
    """The assignment and its instance's workflow path; NOT_FOUND when it is absent or
    `actor` may not read its instance (the same answer: nothing leaks)."""
    async with runtime.uow(readonly=True) as uow:
        found = await uow.assignments.get(assignment_id)
        process = None if found is None else await uow.processes.get(found.process_id)
        if found is None or process is None or not await actor_may_read(uow, actor, process):
            raise not_found("assignment")
    return found, process.workflow


async def _change(
    runtime: Runtime, actor: Any, assignment_id: str, name: str, extra: Mapping[str, Any]
) -> AssignmentRecord:
    """Append the assignment event `name` for `actor` and return the assignment after it."""
    if not isinstance(assignment_id, str) or not assignment_id:
        raise DomainError(INVALID_INPUT, "an assignment id is required", pointer="/id")
    who = actor_id(actor)
    found, workflow = await _load(runtime, assignment_id, who)
    input = {"assignment": assignment_id, **extra}
    signed = attest(runtime, who, found.process_id, name, workflow, input)
    await act(runtime, signed, attested=True)
    after, _ = await _load(runtime, assignment_id, who)
    return after


async def claim_assignment(runtime: Runtime, actor: Any, assignment_id: str) -> AssignmentRecord:
    """Claim an unassigned assignment (needs its team role); a lost race: ALREADY_CLAIMED."""
    return await _change(runtime, actor, assignment_id, CLAIM, {})


async def unclaim_assignment(runtime: Runtime, actor: Any, assignment_id: str) -> AssignmentRecord:
    """Put a claimed assignment back into its team's queue (assignee or admin)."""
    return await _change(runtime, actor, assignment_id, UNCLAIM, {})


async def complete_assignment(
    runtime: Runtime,
    actor: Any,
    assignment_id: str,
    review_data: Any,
    action: str | None = None,
    input: Mapping[str, Any] | None = None,
) -> AssignmentRecord:
    """Complete the actor's claimed assignment with `review_data` and perform `action` on
    the instance (advance when None) in the same event; the action's input gets
    `reviewData` unless `input` sets it."""
    extra: dict[str, Any] = {"reviewData": review_data}
    if action is not None:
        extra["action"] = action
    if input:
        extra["input"] = dict(input)
    return await _change(runtime, actor, assignment_id, COMPLETE, extra)


async def cancel_assignment(runtime: Runtime, actor: Any, assignment_id: str) -> AssignmentRecord:
    """Cancel an open assignment (admin)."""
    return await _change(runtime, actor, assignment_id, ASSIGNMENT_CANCEL, {})


def assignment_cursor(assignment: AssignmentRecord) -> list[str]:
    """The keyset position of an assignment in a queue (what a cursor encodes)."""
    return [assignment.created_at.isoformat(), assignment.id]


def _after(after: str | Sequence[Any] | None) -> tuple[datetime, str] | None:
    """Decode a queue cursor: base64url JSON `[created_at, id]` or that list itself."""
    if after is None:
        return None
    value: Any = after
    if isinstance(after, str):
        try:
            value = json.loads(base64.urlsafe_b64decode(after.encode("ascii")))
        except (binascii.Error, ValueError, UnicodeError):
            value = None
    try:
        created, aid = value
        return datetime.fromisoformat(str(created)), str(aid)
    except (TypeError, ValueError):
        raise DomainError(INVALID_INPUT, "invalid cursor", pointer="/after") from None


def _page(first: int | None, status: str | None) -> int:
    if status is not None and status not in STATUSES:
        raise DomainError(INVALID_INPUT, f"status must be one of {', '.join(STATUSES)}",
                          pointer="/status")  # fmt: skip
    size = DEFAULT_FIRST if first is None else first
    if size < 0 or size > MAX_FIRST:
        raise DomainError(INVALID_INPUT, f"first must be between 0 and {MAX_FIRST}",
                          pointer="/first")  # fmt: skip
    return size


async def list_assignments(
    runtime: Runtime,
    viewer: Any,
    team: str | None = None,
    status: str | None = None,
    first: int | None = DEFAULT_FIRST,
    after: str | Sequence[Any] | None = None,
) -> list[AssignmentRecord]:
    """A team's queue, oldest first: up to `first + 1` rows after the cursor (the extra
    row says a next page exists; `assignment_cursor` is the key). The viewer sees the
    namespaces where it holds the team role or `admin`; without `team`, those where it
    is admin."""
    size = _page(first, status)
    who = actor_id(viewer)
    async with runtime.uow(readonly=True) as uow:
        grants = await uow.grants.of_actor(who)
        wanted = {ADMIN_ROLE} | ({team.lower()} if team else set())
        scopes = sorted({g.namespace for g in grants if g.role.lower() in wanted})
        return await kernel_repo(uow).assignment_queue(
            namespaces=scopes, team=team, status=status, after=_after(after), limit=size + 1
        )


async def my_assignments(
    runtime: Runtime,
    actor: Any,
    status: str | None = None,
    first: int | None = MAX_FIRST,
    after: str | Sequence[Any] | None = None,
) -> list[AssignmentRecord]:
    """The actor's own assignments ("mine": claimed by it, or unassigned naming it a
    candidate user), oldest first, up to `first + 1` rows."""
    size = _page(first, status)
    async with runtime.uow(readonly=True) as uow:
        return await uow.assignments.mine(
            actor_id(actor), readable=_readable(actor), status=status, after=_after(after),
            limit=size + 1,
        )  # fmt: skip


async def count_assignments(
    runtime: Runtime, viewer: Any, team: str | None = None, status: str | None = None
) -> int:
    """How many assignments `list_assignments` lists over all its pages."""
    _page(None, status)
    who = actor_id(viewer)
    async with runtime.uow(readonly=True) as uow:
        grants = await uow.grants.of_actor(who)
        wanted = {ADMIN_ROLE} | ({team.lower()} if team else set())
        scopes = sorted({g.namespace for g in grants if g.role.lower() in wanted})
        return await kernel_repo(uow).count_assignment_queue(
            namespaces=scopes, team=team, status=status
        )


async def count_my_assignments(runtime: Runtime, actor: Any, status: str | None = None) -> int:
    """How many assignments `my_assignments` lists over all its pages."""
    _page(None, status)
    async with runtime.uow(readonly=True) as uow:
        return await uow.assignments.count_mine(
            actor_id(actor), readable=_readable(actor), status=status
        )


def _readable(viewer: Any) -> list[str]:
    """The namespaces where `viewer` holds a grant (it may read them and below)."""
    return sorted({g.namespace for g in getattr(viewer, "grants", ())})


def search_scope(viewer: Any) -> AssignmentScope:
    """What `viewer` may list of assignments (`persistence.search.AssignmentScope`): the
    team-queue rule of `assignments(team)` and `assignmentQueue` (the team's role or
    `admin` in the namespace or above), plus its own claims and candidacies wherever it
    may read. Nothing for a viewer without grants."""
    grants = tuple(getattr(viewer, "grants", ()))
    admin = sorted({g.namespace for g in grants if g.role.lower() == ADMIN_ROLE})
    if SYSTEM_NAMESPACE in admin:
        return AssignmentScope(everything=True)
    teams: dict[str, set[str]] = {}
    for g in grants:
        if g.role.lower() != ADMIN_ROLE:
            teams.setdefault(g.role.lower(), set()).add(g.namespace)
    return AssignmentScope(
        admin_namespaces=tuple(admin),
        teams=tuple((role, tuple(sorted(ns))) for role, ns in sorted(teams.items())),
        readable=tuple(_readable(viewer)),
        actor=actor_id(viewer),
    )


async def search_assignments(
    runtime: Runtime, viewer: Any, search: AssignmentSearch, *, order: Ordering,
    position: tuple[Any, str] | None, backward: bool, limit: int,
) -> tuple[list[AssignmentRecord], list[tuple[Any, str]]]:  # fmt: skip
    """`assignments(filter, orderBy, ...)`: up to `limit` assignments the viewer may see
    after `position` (mirrored when `backward`), each with its keyset position."""
    async with runtime.uow(readonly=True) as uow:
        found = await uow.task_search.assignments(
            search, scope=search_scope(viewer), order=order, position=position,
            backward=backward, limit=limit,
        )  # fmt: skip
    return [a for a, _ in found], [(v, a.id) for a, v in found]


def mine_search(viewer: Any, status: str | None) -> AssignmentSearch:
    """`myAssignments` as a search: the viewer's claims and open candidacies (the rule of
    `my_assignments`, which limits what it lists by itself: no further scope)."""
    _page(None, status)
    return AssignmentSearch(
        statuses=(status,) if status else (), mine=actor_id(viewer),
        mine_readable=tuple(_readable(viewer)),
    )  # fmt: skip


async def search_mine(
    runtime: Runtime, viewer: Any, status: str | None, *, order: Ordering,
    position: tuple[Any, str] | None, backward: bool, limit: int,
) -> tuple[list[AssignmentRecord], list[tuple[Any, str]]]:  # fmt: skip
    """`myAssignments(status, first, after, last, before)`: a page of `mine_search`."""
    async with runtime.uow(readonly=True) as uow:
        found = await uow.task_search.assignments(
            mine_search(viewer, status), scope=AssignmentScope(everything=True), order=order,
            position=position, backward=backward, limit=limit,
        )  # fmt: skip
    return [a for a, _ in found], [(v, a.id) for a, v in found]


async def count_mine_search(runtime: Runtime, viewer: Any, status: str | None) -> int:
    """How many assignments `search_mine` lists over all its pages."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.task_search.count(
            mine_search(viewer, status), scope=AssignmentScope(everything=True)
        )


async def count_search(runtime: Runtime, viewer: Any, search: AssignmentSearch) -> int:
    """How many assignments `search_assignments` lists over all its pages."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.task_search.count(search, scope=search_scope(viewer))


# --- revocation ---------------------------------------------------------------------------

#: How many claims of one member a revocation releases in one pass.
RELEASE_LIMIT = 1000
REVOKED_REASON = "revoked"


async def release_claims(runtime: Runtime, member: str) -> list[str]:
    """Release `member`'s claims on assignments it may no longer hold — it lost the team
    role (and `admin`) in the instance's namespace — each by a system `$unclaim`
    (recorded, so `verify` replays it); returns the released assignment ids. A revoked
    assignee must not keep its team's work blocked."""
    async with runtime.uow(readonly=True) as uow:
        claimed = await uow.assignments.queue(assignee=member, status=CLAIMED,
                                              limit=RELEASE_LIMIT)  # fmt: skip
        processes = await uow.processes.processes_by_ids([a.process_id for a in claimed])
        stale = []
        for a in claimed:
            process = processes.get(a.process_id)
            if process is None:
                continue
            roles = await uow.grants.roles_of(member, process.namespace)
            if a.team.lower() not in roles and ADMIN_ROLE not in roles:
                stale.append((a, process))
    released = []
    for a, process in stale:
        input = {"assignment": a.id, "reason": REVOKED_REASON}
        try:
            await system_act(runtime, process.id, process.workflow, UNCLAIM, input)
        except DomainError as error:  # it moved on meanwhile: nothing left to release
            log.info("claim %s of %s not released: %s", a.id, member, error)
            continue
        released.append(a.id)
    return released


def install_release(runtime: Runtime) -> Callable[[], Awaitable[None]]:
    """Release claims after every role revocation this node commits; returns `stop`."""

    async def on_commit(messages: Sequence[Mapping[str, Any]]) -> None:
        for message in messages:
            details = message.get("details") or {}
            member = details.get(ev.D_MEMBER) if isinstance(details, Mapping) else None
            if message.get("type") == ev.ROLE_REVOKED and isinstance(member, str):
                await release_claims(runtime, member)

    runtime.publishers.append(on_commit)

    async def stop() -> None:
        if on_commit in runtime.publishers:
            runtime.publishers.remove(on_commit)

    return stop
