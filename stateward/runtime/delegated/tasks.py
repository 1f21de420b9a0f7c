"""Workers and delegated tasks: `delegated_tasks`, `lock_task`, `complete_task`.

Who may work: a holder of `admin`, `operator` or `worker` in the task's namespace (or
above) lists and locks its tasks; anyone else is told the task does not exist. A lock is
a lease, not a fact of the instance: a conditional UPDATE (exactly one of two concurrent
lockers wins, `ALREADY_CLAIMED` for the other) that gives the worker a new callback token
valid until the lease ends, replacing any earlier token of the task — so a webhook's
token and a lapsed worker's token stop working once someone holds the task. Completing is
an event by `delegate:<task>:<token digest>` (the action, or `$advance`), written through
`act`; the write path refuses it unless the token is the task's current one, unexpired,
and the instance is still in that stay of the state.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from stateward.domain.access import ADMIN_ROLE, OPERATOR_ROLE
from stateward.domain.errors import (
    ALREADY_CLAIMED,
    DELEGATION_CLOSED,
    DELEGATION_EXPIRED,
    FORBIDDEN,
    INVALID_INPUT,
    NOT_FOUND,
    DomainError,
)
from stateward.governance.envelope import format_ts
from stateward.persistence.delegated import OPEN
from stateward.records import DelegatedTaskRecord, ProcessRecord
from stateward.runtime.core.act import ActResult, act
from stateward.runtime.core.commands import attest
from stateward.runtime.core.delegation import delegate_id, new_token, token_hash
from stateward.runtime.core.kernel import ADVANCE
from stateward.runtime.core.ops_support import actor_id
from stateward.runtime.core.policy import not_found
from stateward.runtime.core.rate_limit import CALLBACK_FAILURES, limited, limiter_for
from stateward.runtime.core.services import Runtime

#: The role that lets a worker take delegated tasks without operating the namespace.
WORKER_ROLE = "worker"
WORK_ROLES = frozenset({ADMIN_ROLE, OPERATOR_ROLE, WORKER_ROLE})
MIN_LOCK_S = 1
MAX_LOCK_S = 24 * 3600
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")


@dataclass(frozen=True)
class DelegatedTask:
    """An open delegated task with the context a worker needs (seed §4 `delegated`)."""

    task: DelegatedTaskRecord
    data: Mapping[str, Any]
    form: Any
    metadata: Mapping[str, Any]


@dataclass(frozen=True)
class LockedTask:
    """A task leased to the caller: the task, its context, and the callback token."""

    task: DelegatedTask
    token: str
    locked_until: datetime


def _may_work(roles: frozenset[str]) -> bool:
    return bool(roles & WORK_ROLES)


async def _work_scopes(runtime: Runtime, worker: str) -> list[str]:
    """The namespaces where `worker` may work (its grants of a work role; each covers
    the namespaces below it)."""
    async with runtime.uow(readonly=True) as uow:
        grants = await uow.grants.of_actor(worker)
    return sorted({g.namespace for g in grants if g.role.lower() in WORK_ROLES})


async def _context(runtime: Runtime, tasks: list[DelegatedTaskRecord]) -> list[DelegatedTask]:
    """Each task with its instance's data, its state's form and the instance metadata."""
    out = []
    async with runtime.uow(readonly=True) as uow:
        for task in tasks:
            process = await uow.processes.get(task.process_id)
            if process is None:
                continue
            definition = await runtime.definition(uow, process.workflow, process.workflow_version)
            out.append(_with_context(task, process, definition.source))
    return out


def _with_context(
    task: DelegatedTaskRecord, process: ProcessRecord, source: Mapping[str, Any]
) -> DelegatedTask:
    state = source.get("states", {}).get(task.state, {})
    form = state.get("form") if isinstance(state, Mapping) else None
    return DelegatedTask(task, dict(process.data), form, dict(process.instance_metadata or {}))


async def delegated_tasks(
    runtime: Runtime,
    actor: Any,
    *,
    surface: str | None,
    namespace: str | None,
    available_only: bool,
    after: tuple[datetime, str] | None,
    limit: int,
    backward: bool = False,
) -> list[DelegatedTask]:
    """Open tasks the caller may work on (of `surface` / below `namespace` when given),
    oldest first, `limit` rows after `after` (created_at, id); none for a caller without
    a work role (nothing about other tenants' tasks shows). `backward`: the ones before
    `after`, newest first (to page backward)."""
    worker = actor_id(actor)
    scopes = await _work_scopes(runtime, worker)
    if namespace is not None:
        scopes = _narrow(scopes, namespace)
    if not scopes or limit <= 0:
        return []
    async with runtime.uow(readonly=True) as uow:
        rows = await uow.delegated.open_tasks(
            scopes, surface=surface, now=runtime.clock.now(), available_only=available_only,
            after=after, limit=limit, backward=backward,
        )  # fmt: skip
    return await _context(runtime, rows)


async def count_delegated_tasks(
    runtime: Runtime, actor: Any, *, surface: str | None, namespace: str | None,
    available_only: bool,
) -> int:  # fmt: skip
    """How many tasks `delegated_tasks` pages through for the caller (`totalCount`)."""
    scopes = await _work_scopes(runtime, actor_id(actor))
    if namespace is not None:
        scopes = _narrow(scopes, namespace)
    if not scopes:
        return 0
    async with runtime.uow(readonly=True) as uow:
        return await uow.delegated.count_open(
            scopes, surface=surface, now=runtime.clock.now(), available_only=available_only
        )


def _narrow(scopes: list[str], namespace: str) -> list[str]:
    """The part of `scopes` (each with what is below it) that lies below `namespace`."""
    if any(s == "system" or namespace == s or namespace.startswith(f"{s}/") for s in scopes):
        return [namespace]
    return [s for s in scopes if s.startswith(f"{namespace}/")]


async def lock_task(runtime: Runtime, actor: Any, task_id: str, seconds: int) -> LockedTask:
    """Lease task `task_id` to the caller for `seconds` and hand it a fresh callback token
    (the caller renewing its own lease gets a new token too). NOT_FOUND for a task the
    caller may not see, FORBIDDEN without a work role, ALREADY_CLAIMED while another
    worker's lease runs, DELEGATION_CLOSED once the stage is over."""
    if not isinstance(seconds, int) or not MIN_LOCK_S <= seconds <= MAX_LOCK_S:
        raise DomainError(
            INVALID_INPUT, f"seconds must be between {MIN_LOCK_S} and {MAX_LOCK_S}",
            pointer="/seconds",
        )  # fmt: skip
    worker = actor_id(actor)
    now = runtime.clock.now()
    until = now + timedelta(seconds=seconds)
    token = new_token()
    async with runtime.uow() as uow:
        task = await uow.delegated.get(task_id)
        roles = (
            frozenset(await uow.grants.roles_of(worker, task.namespace))
            if task is not None
            else frozenset()
        )
        if task is None or not roles:
            raise not_found("delegated task")
        if not _may_work(roles):
            raise DomainError(
                FORBIDDEN, "locking a delegated task needs the role worker, operator or admin",
                details={"roles": sorted(WORK_ROLES)},
            )  # fmt: skip
        if task.status != OPEN:
            raise DomainError(DELEGATION_CLOSED, "the delegated stage is over")
        won = await uow.delegated.lock(
            task.id, worker, token_hash(token), now, until, [task.namespace]
        )
        if not won:
            raise DomainError(
                ALREADY_CLAIMED, "another worker holds this task",
                details={"lockedUntil": format_ts(task.locked_until) if task.locked_until
                         else None},
            )  # fmt: skip
        await uow.commit()
    context = (await _context(runtime, [task]))[0]
    return LockedTask(context, token, until)


async def complete_task(
    runtime: Runtime,
    token: str,
    action: str | None,
    input: Mapping[str, Any] | None,
    *,
    client: str | None = None,
) -> ActResult:
    """Act on the task's instance with its callback token: `action` (one of the delegated
    state's actions) or, when None, advance; through `act`, as the token's delegate.

    `client` (the caller's IP) is limited in failed lookups: each unknown token takes one
    of its `callback_failure_limit` per minute, and a client with none left is refused
    (RATE_LIMITED) before the lookup, a good token included, until its bucket refills."""
    if action is not None and (not action or action.startswith("$")):
        raise DomainError(INVALID_INPUT, "action must be an action name", pointer="/action")
    failures = limiter_for(runtime, CALLBACK_FAILURES)
    key, now = client or "unknown", runtime.clock.now()
    if await failures.blocked(key, now):
        raise limited(key, failures.per_minute)
    task = None
    if isinstance(token, str) and _TOKEN_SHAPE.fullmatch(token):
        digest = token_hash(token)
        async with runtime.uow(readonly=True) as uow:
            task = await uow.delegated.by_token(digest)
    if task is None:
        with contextlib.suppress(DomainError):  # this failure is answered as NOT_FOUND
            await failures.check(key, now)
        raise DomainError(NOT_FOUND, "unknown callback token", pointer="/token")
    if task.status != OPEN:
        raise DomainError(DELEGATION_CLOSED, "the delegated stage is over")
    if task.token_expires_at is None or task.token_expires_at <= runtime.clock.now():
        raise DomainError(DELEGATION_EXPIRED, "the callback token has expired")
    signed = attest(runtime, delegate_id(task.id, digest), task.process_id,
                    action or ADVANCE, task.workflow, dict(input or {}))  # fmt: skip
    return await act(runtime, signed, attested=True)
