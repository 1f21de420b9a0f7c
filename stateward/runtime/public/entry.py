"""Public entry (DESIGN §7): visitors holding an entry token see and act on ONE instance.

A token is 32 random bytes (base64url); only its sha256 is stored (`$entry_token` event,
`processes.entry_token_hash`). A visitor acts as `visitor:<first 16 hex of sha256(token)>`
through server-attested events, so the engine applies its visitor rules (public states,
actions open to `public`/anyone). What a visitor sees is `PublicView` and nothing more:
the current state's key, label, ordinal and total, its form, the data keys its `visible`
lists, the status and whether it may act now. Outside a `public` state the view is frozen
(seed §15): the last public step the instance was in (else its first public step), status
`processing` while it is live, no form, no data — never the internal state's key or
label, in a view or in an error. Every call is rate limited per client IP (`RATE_LIMITED`).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from stateward.domain.access import ADMIN_ROLE, has_role, public_entry, public_start
from stateward.domain.errors import FORBIDDEN, INVALID_INPUT, NOT_FOUND, DomainError
from stateward.domain.forms import check_prefill
from stateward.domain.model import (
    ERROR,
    LIVE_STATUSES,
    VISITOR_PREFIX,
    Definition,
    Outcome,
    StateDef,
)
from stateward.governance.keys import b64url_encode
from stateward.persistence.retry import read_retrying
from stateward.records import INSTANCE, ProcessRecord, StoredEvent
from stateward.runtime.access.auth import token_hash  # entry tokens are stored like bearer tokens
from stateward.runtime.core.act import act
from stateward.runtime.core.commands import attest, start_instance
from stateward.runtime.core.kernel import ADVANCE, ActContext, apply_engine
from stateward.runtime.core.ops_support import (
    actor_id,
    input_str,
    kernel_repo,
    require_instance,
    require_live,
)
from stateward.runtime.core.policy import actor_may_read, not_found
from stateward.runtime.core.rate_limit import limiter_for
from stateward.runtime.core.services import Runtime

ENTRY_TOKEN = "$entry_token"
#: The status a visitor sees while the instance is in a team or system state.
PROCESSING = "processing"
TOKEN_BYTES = 32
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")
_HASH_SHAPE = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class PublicState:
    """The current state as a visitor sees it."""

    key: str
    label: str | None
    ordinal: int
    total: int


@dataclass(frozen=True)
class PublicView:
    """Everything a visitor may see of its instance (DESIGN §7, `PublicView`)."""

    state: PublicState
    form: Mapping[str, Any] | None
    data: Mapping[str, Any]
    status: str
    active: bool
    branding: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class PublicEntry:
    """What `start_public` returns: the visitor's token (shown once) and its view."""

    token: str
    view: PublicView


def new_token() -> str:
    """A fresh entry token: 32 random bytes, base64url without padding."""
    return b64url_encode(secrets.token_bytes(TOKEN_BYTES))


def visitor_id(token: str) -> str:
    """The actor a token's holder acts as: `visitor:<first 16 hex of sha256(token)>`."""
    return f"{VISITOR_PREFIX}{token_hash(token)[:16]}"


# --- kernel operation -----------------------------------------------------------------------


async def op_entry_token(ctx: ActContext) -> Outcome:
    """`$entry_token {tokenHash}`: (re)issue the instance's entry token (only its hash).

    By the system, an admin, the actor who started the instance, or the current state's
    team; a previous token stops working.
    """
    process = require_instance(ctx)
    require_live(process)
    digest = input_str(ctx, "tokenHash")
    if not _HASH_SHAPE.fullmatch(digest):
        raise DomainError(
            INVALID_INPUT, "tokenHash must be 64 lower-case hex", pointer="/tokenHash"
        )
    state = ctx.definition.states.get(process.state)
    team = state.assign if state is not None else None
    allowed = (
        ctx.actor.is_system
        or has_role(ctx.actor, ADMIN_ROLE)
        or ctx.actor.id == process.started_by
        or (team is not None and has_role(ctx.actor, team.lower()))
    )
    if not allowed:
        raise DomainError(FORBIDDEN, "only an admin, the starter or the state's team may issue")
    if not public_entry(ctx.definition):
        raise DomainError(FORBIDDEN, "the workflow has no public state: no entry token")
    outcome = apply_engine(ctx)

    async def store(event: StoredEvent) -> None:
        await kernel_repo(ctx.uow).set_entry_token(process.id, digest)

    ctx.after_event.append(store)
    return outcome


# --- services -------------------------------------------------------------------------------


async def _check_rate(runtime: Runtime, ip: str | None) -> None:
    await limiter_for(runtime).check(ip or "unknown", runtime.clock.now())


async def _issue(runtime: Runtime, actor: str, process: ProcessRecord) -> str:
    token = new_token()
    signed = attest(runtime, actor, process.id, ENTRY_TOKEN, process.workflow,
                    {"tokenHash": token_hash(token)})  # fmt: skip
    await act(runtime, signed, attested=True)
    return token


async def issue_entry_token(runtime: Runtime, actor: Any, instance: str) -> str:
    """A new entry token for a live instance (admin, its starter or the state's team).
    The token is returned once; only its sha256 is kept."""
    who = actor_id(actor)
    async with runtime.uow(readonly=True) as uow:
        process = await uow.processes.get(instance)
        if (
            process is None
            or process.kind != INSTANCE
            or not await actor_may_read(uow, who, process)
        ):
            raise not_found("instance")
    return await _issue(runtime, who, process)


async def start_public(
    runtime: Runtime, workflow: str, data: Mapping[str, Any] | None, ip: str | None
) -> PublicEntry:
    """Start `workflow` as a new visitor (its initial state must be `public`) and return
    the visitor's token and view."""
    await _check_rate(runtime, ip)
    async with runtime.uow(readonly=True) as uow:
        definition = await runtime.definition(uow, workflow)
    if not public_start(definition):
        # A workflow without a public entry is, to the public, one that does not exist.
        raise DomainError(NOT_FOUND, f"workflow {workflow} is not deployed")
    check_prefill(definition.states[definition.initial].form, data)
    token = new_token()
    visitor = visitor_id(token)
    started = await start_instance(runtime, visitor, workflow, data or {})
    signed = attest(runtime, visitor, started.record.id, ENTRY_TOKEN, workflow,
                    {"tokenHash": token_hash(token)})  # fmt: skip
    await act(runtime, signed, attested=True)
    return PublicEntry(token=token, view=await _view(runtime, token))


async def public_view(runtime: Runtime, token: str, ip: str | None) -> PublicView:
    """What the token's holder may see of its instance (NOT_FOUND for an unknown token)."""
    await _check_rate(runtime, ip)
    return await _view(runtime, token)


async def advance_public(
    runtime: Runtime,
    token: str,
    action: str | None,
    input: Mapping[str, Any] | None,
    ip: str | None,
) -> PublicView:
    """Act as the token's visitor: `action` (advance when None) with `input`; the engine
    allows visitors only in `public` states and on actions open to them."""
    await _check_rate(runtime, ip)
    process, definition = await _resolve(runtime, token)
    if action is not None and (not isinstance(action, str) or action.startswith("$")):
        raise DomainError(INVALID_INPUT, "action must be an action name", pointer="/action")
    if process.status in LIVE_STATUSES and definition.states[process.state].audience != "public":
        # frozen: nothing to do here, and nothing about the internal state to say
        raise DomainError(FORBIDDEN, "this form is being processed; nothing to do now")
    signed = attest(runtime, visitor_id(token), process.id, action or ADVANCE, process.workflow,
                    dict(input or {}))  # fmt: skip
    try:
        await act(runtime, signed, attested=True)
    except DomainError as error:
        raise for_visitor(error, process.id, definition) from None
    return await _view(runtime, token)


#: Words of kernel errors a visitor should not read: what they filled in is "this form".
_PROCESS_WORD = re.compile(r"\b(?:process(?:es)?|instance)\b", re.IGNORECASE)
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)


def _internal_names(definition: Definition) -> list[str]:
    """Keys and labels of the states a visitor must never read (team and system states),
    longest first; those that are also a public state's key or label are not secret."""
    shown = {n for s in definition.states.values() if s.audience == "public" for n in _names(s)}
    hidden = {n for s in definition.states.values() if s.audience != "public" for n in _names(s)}
    return sorted(hidden - shown, key=len, reverse=True)


def _names(state: StateDef) -> list[str]:
    return [state.key, *([state.label] if state.label else [])]


def for_visitor(
    error: DomainError, process_id: str, definition: Definition | None = None
) -> DomainError:
    """The same error (code, pointer, problems) worded for an anonymous visitor: never
    the instance id, never "process" — the visitor filled in a form (issue 14) — and never
    an internal (team or system) state's key or label ("another step")."""
    hidden = _internal_names(definition) if definition is not None else []

    def scrub(text: str) -> str:
        text = text.replace(process_id, "this form")
        for name in hidden:
            text = re.sub(rf"(?<![\w]){re.escape(name)}(?![\w])", "another step", text)
        text = _UUID.sub("this form", text)
        text = _PROCESS_WORD.sub("form", text)
        return text.replace("form this form", "this form")

    problems = [replace(p, message=scrub(p.message)) for p in error.problems]
    details = {
        k: v
        for k, v in error.details.items()
        if process_id not in str(v) and scrub(str(v)) == str(v)
    }
    return DomainError(
        error.code, scrub(error.message), pointer=error.pointer, problems=problems,
        details=details,
    )  # fmt: skip


async def _resolve(runtime: Runtime, token: str) -> tuple[ProcessRecord, Definition]:
    """The instance a token opens and its pinned definition; NOT_FOUND otherwise."""
    if not isinstance(token, str) or not _TOKEN_SHAPE.fullmatch(token):
        raise DomainError(NOT_FOUND, "unknown entry token")

    async def read() -> tuple[ProcessRecord, Definition]:
        async with runtime.uow(readonly=True) as uow:
            process = await uow.processes.by_entry_token(token_hash(token))
            if process is None or process.kind != INSTANCE:
                raise DomainError(NOT_FOUND, "unknown entry token")
            definition = await runtime.definition(uow, process.workflow, process.workflow_version)
        return process, definition

    return await read_retrying(read, what="entry token check")


async def _view(runtime: Runtime, token: str) -> PublicView:
    process, definition = await _resolve(runtime, token)
    state = definition.states[process.state]
    total = len(definition.states)
    if state.audience != "public":
        return await _frozen(runtime, process, definition)
    source = definition.source.get("states", {}).get(state.key, {})
    return PublicView(
        state=PublicState(state.key, state.label, state.ordinal, total),
        form=source.get("form") if isinstance(source, Mapping) else None,
        data={k: process.data[k] for k in state.visible if k in process.data},
        status=process.status,
        active=process.status in LIVE_STATUSES,
        branding=_branding(definition),
    )


async def _frozen(runtime: Runtime, process: ProcessRecord, definition: Definition) -> PublicView:
    """The view while the instance is in a team or system state (seed §15): the last public
    step it was in (else its first public step) and `processing` while live (an error is
    the team's to fix: also `processing`); completed / cancelled show as such."""
    public = sorted(
        (s for s in definition.states.values() if s.audience == "public"),
        key=lambda s: s.ordinal,
    )
    async with runtime.uow(readonly=True) as uow:
        last = await uow.visits.last_visited(process.id, [s.key for s in public])
    shown = definition.states[last] if last is not None else (public[0] if public else None)
    header = (
        PublicState(shown.key, shown.label, shown.ordinal, len(definition.states))
        if shown is not None
        else PublicState("", None, 0, len(definition.states))
    )
    ended = process.status not in LIVE_STATUSES and process.status != ERROR
    return PublicView(
        state=header,
        form=None,
        data={},
        status=process.status if ended else PROCESSING,
        active=False,
        branding=_branding(definition),
    )


def _branding(definition: Definition) -> Mapping[str, Any] | None:
    """The workflow's top-level `branding` object (shown to visitors), or None."""
    branding = definition.source.get("branding")
    return branding if isinstance(branding, Mapping) else None
