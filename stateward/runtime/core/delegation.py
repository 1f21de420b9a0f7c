"""Delegated stages in the write path (issue 13): open, guard and close delegated tasks.

An instance entering a `delegated` state (the engine's `workflow.delegated` event) opens
a task row in the same transaction; when the state's surface has a webhook registered
(`setWebhook(surface:)`, in the namespace or above) a delivery is queued with the
instance context (stage data, form, metadata) and a fresh callback token, of which only
the sha256 is stored. Leaving the state (or ending the instance) closes the task and
voids every token of it. An event by a delegate (`delegate:<task id>:<token digest>`) is
written only while its task is open, belongs to the event's instance and is for the very
state the instance is in, and its token is the task's current one and has not expired —
checked under the process row lock, so a stage that moved on between the caller's check
and the write still refuses it.
The core owns this (not a feature package) because every write must keep it true.
"""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from stateward.domain import events as ev
from stateward.domain.canonical import canonical_bytes, sha256_hex
from stateward.domain.errors import DELEGATION_CLOSED, DELEGATION_EXPIRED, DomainError
from stateward.domain.model import DELEGATE_PREFIX, LIVE_STATUSES, Outcome
from stateward.governance.envelope import format_ts
from stateward.governance.roles import namespace_scopes
from stateward.persistence.delegated import OPEN
from stateward.records import DelegatedTaskRecord, ProcessRecord

if TYPE_CHECKING:
    from stateward.runtime.core.kernel import ActContext

TASK_NAMESPACE = uuid.NAMESPACE_URL
#: The webhook row (and delivery scope) of a surface: `surface:<namespace>:<surface>`.
SURFACE_WEBHOOK_PREFIX = "surface:"
TOKEN_BYTES = 32


def task_id(identity: str) -> str:
    """The id of the task an event opens (deterministic: a replay gives the same)."""
    return str(uuid.uuid5(TASK_NAMESPACE, f"stateward:delegated:{identity}"))


def surface_scope(namespace: str, surface: str) -> str:
    """The webhook scope of `surface` in `namespace`."""
    return f"{SURFACE_WEBHOOK_PREFIX}{namespace}:{surface}"


def new_token() -> str:
    """A fresh callback token (32 random bytes, base64url, 43 characters)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> str:
    """The stored form of a callback token (sha256 hex)."""
    return sha256_hex(token.encode("utf-8"))


#: How many hex digits of the token's sha256 a delegate actor id carries.
DELEGATE_DIGITS = 16


def delegate_id(task: str, token_digest: str) -> str:
    """The actor a callback token's holder acts as: `delegate:<task>:<16 hex>`."""
    return f"{DELEGATE_PREFIX}{task}:{token_digest[:DELEGATE_DIGITS]}"


def delegate_of(actor_id: str) -> tuple[str, str] | None:
    """(task id, token digest prefix) of a delegate actor id; None for any other actor."""
    if not actor_id.startswith(DELEGATE_PREFIX):
        return None
    task, _, digest = actor_id[len(DELEGATE_PREFIX) :].rpartition(":")
    return task, digest


def delegate_task(actor_id: str) -> str | None:
    """The task a delegate actor id names, or None for any other actor."""
    found = delegate_of(actor_id)
    return None if found is None else found[0]


async def guard(ctx: ActContext) -> None:
    """Refuse an event by a delegate whose task is not open for the instance's current
    stay in its state (DELEGATION_CLOSED), or whose token is no longer the task's current one
    or has expired (DELEGATION_EXPIRED)."""
    delegate = delegate_of(ctx.envelope.actor)
    if delegate is None:
        return
    task, digest = delegate
    found = await ctx.uow.delegated.get(task)
    process = ctx.process
    if (
        found is None
        or process is None
        or found.process_id != process.id
        or found.status != OPEN
        or found.state != process.state
        or process.status not in LIVE_STATUSES
    ):
        raise DomainError(
            DELEGATION_CLOSED, "the delegated stage is over: this token no longer acts"
        )
    if ctx.runtime.replaying:
        return  # history: the token was valid when the event was first written
    current = found.token_hash is not None and found.token_hash[:DELEGATE_DIGITS] == digest
    if not current or found.token_expires_at is None or found.token_expires_at <= ctx.now:
        # another worker locked the task since (its token replaced this one), or time ran out
        raise DomainError(DELEGATION_EXPIRED, "the callback token has expired")


async def track(ctx: ActContext, outcome: Outcome, record: ProcessRecord) -> str | None:
    """Close the tasks of a stage the event leaves, open the task of a delegated stage it
    enters (queueing the surface webhook); returns the id of the task opened, if any."""
    old = ctx.process
    here = ctx.definition.states.get(record.state)
    before = ctx.definition.states.get(old.state) if old is not None else None
    # Tasks are opened only in delegated states: leaving any other state has none to close
    # (no query on the hot path), except across a `$migrate` (`keep_entry`), whose
    # definition is the new version's.
    maybe_open = ctx.keep_entry or (before is not None and before.mode == "delegated")
    entering = any(e.type == ev.WORKFLOW_DELEGATED for e in outcome.events)
    left = (
        old is not None
        and maybe_open
        and (
            outcome.state_changed
            or record.status not in LIVE_STATUSES
            or here is None
            or here.mode != "delegated"
            or entering  # handed over afresh (a `$migrate` to another surface)
        )
    )
    if left:
        await ctx.uow.delegated.close_open_for_process(
            record.id, ctx.now, completed_by=delegate_task(ctx.envelope.actor)
        )
    if not entering:
        return None
    if record.status not in LIVE_STATUSES:
        return None
    state = here
    if state is None or state.surface is None:
        return None
    opened = task_id(ctx.identity)
    replaying = ctx.runtime.replaying
    hook = None if replaying else await _surface_webhook(ctx, record.namespace, state.surface)
    token = new_token() if hook is not None else None
    expires = ctx.now + timedelta(seconds=ctx.runtime.settings.delegation_token_ttl)
    task = DelegatedTaskRecord(
        id=opened,
        process_id=record.id,
        namespace=record.namespace,
        workflow=record.workflow,
        state=record.state,
        surface=state.surface,
        entered_seq=record.seq,
        status=OPEN,
        created_at=ctx.now,
        token_hash=token_hash(token) if token is not None else None,
        token_expires_at=expires if token is not None else None,
    )
    await ctx.uow.delegated.open(task)
    if hook is not None and token is not None:
        scope, url = hook
        body = canonical_bytes(context(ctx, record, task, token)).decode("utf-8")
        await ctx.uow.webhooks.enqueue(
            scope, url, ev.WORKFLOW_DELEGATED, body, ctx.now, process_id=record.id
        )
    ctx.payload_overrides[ev.WORKFLOW_DELEGATED] = {
        ev.F_DETAILS: {ev.D_SURFACE: state.surface, ev.D_TASK: opened}
    }
    return opened


async def _surface_webhook(ctx: ActContext, namespace: str, surface: str) -> tuple[str, str] | None:
    """(scope, url) of the surface's webhook in `namespace` or the nearest above."""
    for scope_ns in reversed(namespace_scopes(namespace)):
        scope = surface_scope(scope_ns, surface)
        found = await ctx.uow.webhooks.get(scope)
        if found is not None and found.url:
            return scope, found.url
    return None


def context(
    ctx: ActContext, record: ProcessRecord, task: DelegatedTaskRecord, token: str | None
) -> dict[str, Any]:
    """The instance context handed to a surface (seed §4 `delegated`): stage data, the
    state's form, the instance metadata, and the callback (token and its expiry)."""
    source = ctx.definition.source.get("states", {}).get(record.state, {})
    form = source.get("form") if isinstance(source, dict) else None
    body: dict[str, Any] = {
        "type": ev.WORKFLOW_DELEGATED,
        "task": task.id,
        "instanceId": record.id,
        "namespace": record.namespace,
        "workflow": record.workflow,
        "version": record.workflow_version,
        "state": record.state,
        "surface": task.surface,
        "data": dict(record.data),
        "form": form,
        "metadata": dict(record.instance_metadata or {}),
    }
    if token is not None and task.token_expires_at is not None:
        body["callback"] = {"token": token, "expiresAt": format_ts(task.token_expires_at)}
    return body
