"""`act`: the ONE path of every state change (DESIGN §1, §6, §8).

signed envelope -> canonical bytes and identity -> verify (net, signer, signature, ±300 s,
revoked keys) -> load the process and its pinned definition -> roles -> kernel operation /
`domain.engine` -> one transaction (process row, hash-chained event row, effects, outbox)
-> commit -> publish the outbox messages.

Resubmitting the exact same envelope returns the original event (`duplicate=True`); the
same (actor, nonce) with other content is `REPLAYED`. A concurrent writer that loses the
race on the process's seq is re-evaluated on fresh state when server-attested, else
answered `CONFLICT`. Nothing is ever half written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError

from stateward.domain.access import may_read
from stateward.domain.bootstrap import bootstrap_definition
from stateward.domain.canonical import loads_strict
from stateward.domain.errors import (
    BAD_SIGNATURE,
    CONFLICT,
    INVALID_INPUT,
    NOT_FOUND,
    REPLAYED,
    UNAVAILABLE,
    DomainError,
)
from stateward.domain.frozen import quick_init
from stateward.domain.model import Actor, Definition, Outcome, ProcessSnapshot
from stateward.domain.paths import is_namespace, is_registry_id, registry_id
from stateward.governance.envelope import Envelope, SignedEnvelope
from stateward.governance.keys import is_public_key, verify_signature
from stateward.governance.verification import verify_envelope
from stateward.observe import metrics, tracing
from stateward.observe.act import observed_act
from stateward.persistence import NonceConflict, SeqConflict, UnitOfWork
from stateward.persistence.access import grant_generation, grants_written
from stateward.persistence.errors import is_transient
from stateward.persistence.retry import (
    TRANSIENT_ATTEMPTS,
    describe,
    pause_before,
    read_retrying,
    retry_transient,
)
from stateward.records import (
    INSTANCE,
    REGISTRY,
    KeyStatusRecord,
    OutboxRecord,
    ProcessRecord,
    StoredEvent,
)
from stateward.runtime.core.grantcache import GrantCache
from stateward.runtime.core.idempotency import is_keyed, same_request
from stateward.runtime.core.joins import awaiting_ancestors
from stateward.runtime.core.kernel import (
    START,
    ActContext,
    op_advance,
    op_business,
    op_cancel,
    op_start,
    select_op,
)
from stateward.runtime.core.services import Runtime
from stateward.runtime.core.writes import Written, write_event

log = logging.getLogger(__name__)
#: How often a server-attested event is re-evaluated after losing a seq race.
MAX_ATTEMPTS = 50
BOOTSTRAP_SUFFIX = "/bootstrap"
#: Operations whose only process-row write is the event's own (safe to cache the result).
CACHEABLE_OPS = frozenset({op_advance, op_business, op_cancel, op_start})


@quick_init
@dataclass(frozen=True)
class ActorRoles:
    """The roles an event's actor held in its process's namespace as the event's own
    transaction saw them after the last write of its batch, i.e. at its commit (None:
    the actor's key was revoked or rotated by then). A client-signed answer's read rule
    takes them instead of reading again after the commit (`resolvers/writes._answer`)."""

    actor: str
    namespace: str
    roles: frozenset[str] | None


@quick_init
@dataclass(frozen=True)
class ActResult:
    """The event an envelope produced (or, for a resubmission, already had)."""

    event: StoredEvent
    process: ProcessSnapshot
    record: ProcessRecord
    outcome: Outcome | None
    duplicate: bool = False
    children: tuple[ProcessRecord, ...] = ()
    outbox: tuple[OutboxRecord, ...] = field(default=(), repr=False)
    #: Set by the group committer for an envelope signed by its own actor.
    actor_roles: ActorRoles | None = field(default=None, repr=False, compare=False)


def parse_signed(body: str | bytes | Mapping[str, Any]) -> SignedEnvelope:
    """`{"event", "signer", "signature"}` from JSON text (strict: NaN, ±Inf, unsafe
    integers and duplicate keys are refused before anything else) or a parsed object."""
    value = loads_strict(body) if isinstance(body, (str, bytes)) else body
    return SignedEnvelope.from_json(value)


async def act(
    runtime: Runtime, signed: SignedEnvelope, *, attested: bool, signature_ok: bool | None = None
) -> ActResult:
    """Verify and apply one signed envelope (see the module docstring); the only writer.

    An envelope whose nonce comes from an idempotency key (`runtime/core/idempotency.py`)
    that was already used answers the original event when it asks for the same thing,
    else `REPLAYED`. `signature_ok`: `keys.verify_signature` of exactly this envelope's
    signer, canonical bytes and signature, when the caller already ran it (`act_many`
    checks a batch's signatures in a helper process); every other check still runs.
    """
    with observed_act(op_label(signed)) as seen:
        return seen.done(
            await _keyed_act(runtime, signed, attested=attested, signature_ok=signature_ok)
        )


def op_label(signed: SignedEnvelope) -> str:
    """The kernel operation an envelope asks for, as a metric label (`unknown` if none)."""
    envelope = signed.envelope
    try:
        op = select_op(envelope, registry=envelope.action.workflow.endswith(BOOTSTRAP_SUFFIX))
    except DomainError:
        return "unknown"
    return op.__name__.removeprefix("op_")


async def _keyed_act(
    runtime: Runtime, signed: SignedEnvelope, *, attested: bool, signature_ok: bool | None = None
) -> ActResult:
    """`_act`, answering a retried idempotency key with its original event."""
    envelope = signed.envelope
    keyed = is_keyed(envelope)
    if keyed:
        original = await _keyed_original(runtime, envelope)
        if original is not None:
            return original
    try:
        return await _act(runtime, signed, attested=attested, signature_ok=signature_ok)
    except DomainError as error:
        if error.code != REPLAYED or not keyed:
            raise
        original = await _keyed_original(runtime, envelope)  # a concurrent retry won
        if original is None:
            raise
        return original


async def _act(
    runtime: Runtime, signed: SignedEnvelope, *, attested: bool, signature_ok: bool | None = None
) -> ActResult:
    envelope = signed.envelope
    identity = envelope.identity()
    now = runtime.clock.now()
    try:
        with tracing.span("act.verify"):
            await _verify_signature(runtime, signed, now, own=attested, checked=signature_ok)
    except DomainError as error:
        return await _resubmission(runtime, signed, identity, error, check_nonce=False)
    if runtime.group_commit:
        from stateward.runtime.core.group import committer_of

        return await committer_of(runtime).submit(signed, identity, attested=attested)
    return await act_verified(runtime, signed, identity, now, attested=attested)


async def _keyed_original(runtime: Runtime, envelope: Envelope) -> ActResult | None:
    """The event stored under this keyed envelope's (actor, nonce): the original when it
    is the same request (`duplicate`), REPLAYED when it is another; None when unused."""

    async def lookup() -> tuple[StoredEvent, ProcessRecord] | None:
        async with runtime.uow(readonly=True) as uow:
            stored = await uow.events.by_nonce(envelope.actor, envelope.nonce)
            if stored is None:
                return None
            record = await uow.processes.get(stored.process_id)
            assert record is not None
            return stored, record

    found = await retry_transient(lookup, what=f"idempotency key check on {envelope.process}")
    if found is None:
        return None
    stored, record = found
    if not same_request(stored, envelope):
        raise DomainError(
            REPLAYED,
            "this idempotencyKey was already used for a different request "
            f"(event {stored.seq} of {stored.process_id})",
            details={"actor": envelope.actor, "process": stored.process_id, "seq": stored.seq},
        )
    return ActResult(stored, record.snapshot(), record, None, duplicate=True)


async def act_verified(
    runtime: Runtime,
    signed: SignedEnvelope,
    identity: str,
    now: datetime,
    *,
    attested: bool,
    cache: ReadCache | None = None,
) -> ActResult:
    """`act` after the signature checks: one transaction per event, run again on fresh
    state after a lost seq race (server-attested events) and after a transient database
    fault (any event: the seq check makes it committed once or not at all)."""
    envelope = signed.envelope
    written: Written | None = None
    races = faults = 0
    while True:
        try:
            async with runtime.uow() as uow:
                with tracing.span("act.engine"):
                    attempt = await apply_in(runtime, uow, signed, identity, now, cache=cache)
                with tracing.span("act.commit"):
                    await uow.commit()
            written = attempt
            break
        except SeqConflict:
            races += 1
            if not attested or races >= MAX_ATTEMPTS:
                break
        except (DomainError, NonceConflict) as error:
            return await _resubmission(runtime, signed, identity, error)
        except IntegrityError as error:
            conflict = DomainError(CONFLICT, f"concurrent write on {envelope.process}: {error}")
            return await _resubmission(runtime, signed, identity, conflict)
        except Exception as error:
            if not is_transient(error):
                raise
            if faults >= TRANSIENT_ATTEMPTS:
                raise DomainError(
                    UNAVAILABLE,
                    f"the database stayed unavailable ({describe(error)}); nothing was "
                    "applied twice: retry later (with the same idempotencyKey)",
                ) from error
            faults += 1
            log.info("event on %s: transient database fault (%s); retry %d", envelope.process,
                     describe(error), faults)  # fmt: skip
            await asyncio.sleep(pause_before(faults))
        cache = None  # a retry reads everything afresh
        now = runtime.clock.now()
    if written is None:
        raise DomainError(
            CONFLICT,
            f"process {envelope.process} changed concurrently; re-read it and sign again",
        )
    await after_commit(runtime, written)
    return result_of(written)


def result_of(written: Written, actor_roles: ActorRoles | None = None) -> ActResult:
    """The `ActResult` of a committed write."""
    return ActResult(
        event=written.event,
        process=written.process.snapshot(),
        record=written.process,
        outcome=written.outcome,
        duplicate=False,
        children=tuple(written.children),
        outbox=tuple(written.outbox),
        actor_roles=actor_roles,
    )


async def after_commit(runtime: Runtime, written: Written) -> None:
    """Publish the committed outbox messages, then start automation of system states."""
    with tracing.span("act.publish"):
        await publish_committed(runtime, list(written.outbox))
    await automate_committed(runtime, written)


async def publish_committed(runtime: Runtime, outbox: list[OutboxRecord]) -> None:
    """Publish the outbox rows of committed events in one call, in commit order (the
    group committer's batch; `after_commit` does the same for one event)."""
    await runtime.publish([row.message() for row in outbox])
    metrics.record_published(row.created_at for row in outbox)


async def automate_committed(runtime: Runtime, written: Written) -> None:
    """After the commit and the publish: run the automation of the system states the
    event entered, then deliver the messages it sent."""
    for process_id, hook in written.hooks:
        await runtime.run_automation(process_id, hook)
    if written.messages:
        await runtime.deliver_messages(written.messages)


async def _verify_signature(
    runtime: Runtime,
    signed: SignedEnvelope,
    now: datetime,
    *,
    own: bool = False,
    checked: bool | None = None,
) -> None:
    """The checks that need no database: net, signer trust, signature, ±300 s.

    `own`: a server-attested envelope this process just built; when this node's key signed
    it, its signature is not checked again (it was made over the same cached canonical
    bytes a moment ago). Client input never gets here with `own` (`submitEvent` passes
    `attested=False`); every other check still runs. `checked`: the signature's verdict
    when the caller has it (`act`'s `signature_ok`)."""
    try:
        verify_known(runtime, signed, now, own=own, checked=checked)
    except DomainError as error:
        if error.details.get("reason") != "untrusted_signer":
            raise
        trusted = await runtime.refresh_trusted()  # another node may have joined
        verify_envelope(
            signed, net=runtime.net, now=now, trusted_signers=trusted, signature_ok=checked
        )


def verify_known(
    runtime: Runtime,
    signed: SignedEnvelope,
    now: datetime,
    *,
    own: bool = False,
    checked: bool | None = None,
) -> None:
    """`_verify_signature`'s checks against the signers this runtime knows now (an
    untrusted signer is refused here; `_verify_signature` then refreshes them once)."""
    fresh = True if own and signed.signer == runtime.node_public else checked
    verify_envelope(
        signed,
        net=runtime.net,
        now=now,
        trusted_signers=runtime.trusted_signers,
        signature_ok=fresh,
    )


@dataclass
class ReadCache:
    """Reads one transaction may reuse across the events it applies (group commit):
    key statuses and roles (cleared after any registry event: grants, keys change), and
    the runtime's `GrantCache` behind them, which keeps them across transactions for as
    long as the grants generation this transaction reads is the one it was filled at."""

    statuses: dict[str, KeyStatusRecord | None] = field(default_factory=dict)
    roles: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    #: Process rows as this transaction last read or wrote them (taken once each).
    processes: dict[str, ProcessRecord] = field(default_factory=dict)
    #: The runtime's cache across transactions (None: this transaction reads everything).
    shared: GrantCache | None = None
    #: The grants generation this transaction read (None: not read yet).
    generation: int | None = None

    def clear(self) -> None:
        """Forget everything (a registry event may have changed grants or keys)."""
        self.statuses.clear()
        self.roles.clear()
        self.processes.clear()

    async def _shared(self, uow: UnitOfWork) -> GrantCache | None:
        """The runtime's cache if this transaction may use it: it wrote no grant or key
        (its reads see its own uncommitted rows) and the cache is at the generation this
        transaction read (one read, the first time it is needed)."""
        shared = self.shared
        if shared is None or grants_written(uow.session):
            return None
        if self.generation is None:
            self.generation = await grant_generation(uow.session)
            shared.at(self.generation)
        return shared if shared.generation == self.generation else None

    async def key_statuses(
        self, uow: UnitOfWork, keys: set[str]
    ) -> dict[str, KeyStatusRecord | None]:
        """The recorded status of each of `keys` (None: never rotated or revoked)."""
        missing = keys - self.statuses.keys()
        if missing:
            shared = await self._shared(uow)
            if shared is not None:
                for key in [k for k in missing if k in shared.statuses]:
                    self.statuses[key] = shared.statuses[key]
                    missing.discard(key)
                    shared.hits += 1
            if missing:
                found = await uow.keys.statuses(missing)
                fresh = {k: found.get(k) for k in missing}
                self.statuses.update(fresh)
                if shared is not None and self.generation is not None:
                    shared.misses += len(fresh)
                    if not grants_written(uow.session):
                        shared.keep_statuses(self.generation, fresh)
        return {k: self.statuses[k] for k in keys}

    async def roles_in(self, uow: UnitOfWork, actor_id: str, namespace: str) -> frozenset[str]:
        """The roles `actor_id` holds in `namespace` (system + every prefix)."""
        key = (actor_id, namespace)
        cached = self.roles.get(key)
        if cached is not None:
            return cached
        shared = await self._shared(uow)
        if shared is not None:
            cached = shared.roles.get(key)
            if cached is not None:
                shared.hits += 1
                self.roles[key] = cached
                return cached
        cached = frozenset(await uow.grants.roles_of(actor_id, namespace))
        self.roles[key] = cached
        if shared is not None and self.generation is not None:
            shared.misses += 1
            if not grants_written(uow.session):
                shared.keep_roles(self.generation, key, cached)
        return cached

    async def prefetch(self, runtime: Runtime, uow: UnitOfWork, process_ids: list[str]) -> None:
        """Lock and read the batch's processes and the ancestors their events may write
        (`$child`), in one query, in id order (step 1 of the lock order,
        `persistence/sequencer.py`; SQLite: the write lock is already held)."""
        self.processes.update(await lock_family(runtime, uow, process_ids))


async def lock_family(
    runtime: Runtime, uow: UnitOfWork, process_ids: Iterable[str]
) -> dict[str, ProcessRecord]:
    """Step 1 of the lock order for a transaction that writes `process_ids`: lock them
    and every ancestor their events may write through `$child` (a child's end tells its
    awaiting parent, whose join may end it and tell its own), all at once, sorted by id."""
    ids = list(process_ids)
    return await uow.processes.lock([*ids, *await awaiting_ancestors(runtime, uow, ids)])


async def lock_process(runtime: Runtime, uow: UnitOfWork, process_id: str) -> ProcessRecord | None:
    """Lock and read one event's process (with its awaiting ancestors, `lock_family`)."""
    above = await awaiting_ancestors(runtime, uow, [process_id])
    if not above:
        return await uow.processes.get(process_id, for_update=True)
    return (await uow.processes.lock([process_id, *above])).get(process_id)


async def check_revoked(
    uow: UnitOfWork, signed: SignedEnvelope, cache: ReadCache | None = None
) -> None:
    """BAD_SIGNATURE when the signer or the actor key is revoked or rotated away.

    Whatever the envelope's `ts` says: a key's revocation is committed before this event,
    so the event would be recorded after it (a stolen key cannot backdate its way in);
    the events recorded before the revocation still verify.
    """
    envelope = signed.envelope
    keys = {k for k in (signed.signer, envelope.actor) if is_public_key(k)}
    if cache is not None:
        known = await cache.key_statuses(uow, keys)
    else:
        found = await uow.keys.statuses(keys)
        known = {k: found.get(k) for k in keys}
    for key in keys:
        status = known.get(key)
        since = (status.revoked_at or status.rotated_at) if status is not None else None
        if status is not None and since is not None:
            raise DomainError(
                BAD_SIGNATURE,
                f"key {key} was {status.status} at {since.isoformat()}",
                details={"reason": "revoked"},
            )


async def apply_in(
    runtime: Runtime,
    uow: UnitOfWork,
    signed: SignedEnvelope,
    identity: str,
    now: datetime,
    *,
    cache: ReadCache | None = None,
) -> Written:
    """Apply `signed` inside `uow` (no commit): every read, the evaluation, every write.

    `cache` lets the events of one transaction share key-status and role reads (without
    one, this event gets its own, backed by the runtime's `GrantCache` as a batch's is).
    """
    if cache is None:
        cache = ReadCache(shared=runtime.grant_cache)
    envelope = signed.envelope
    await check_revoked(uow, signed, cache)
    workflow = envelope.action.workflow
    registry = workflow.endswith(BOOTSTRAP_SUFFIX)
    process = cache.processes.pop(envelope.process, None) if cache is not None else None
    if process is None:
        process = await lock_process(runtime, uow, envelope.process)
    reader: Actor | None = None
    if registry:
        namespace = workflow[: -len(BOOTSTRAP_SUFFIX)]
        if not is_namespace(namespace) or registry_id(namespace) != envelope.process:
            raise DomainError(
                INVALID_INPUT,
                f"{workflow} events target process {registry_id(namespace)}, "
                f"not {envelope.process}",
                pointer="/process",
            )
        if envelope.action.name.startswith("$"):
            raise DomainError(
                INVALID_INPUT,
                "registries take governance actions only (created by their first event)",
                pointer="/action/name",
            )
        definition = bootstrap_definition(namespace)
        kind, version = REGISTRY, 1
    elif process is None:
        if envelope.action.name != START:
            raise DomainError(NOT_FOUND, f"process {envelope.process} does not exist")
        if is_registry_id(envelope.process):
            raise DomainError(
                INVALID_INPUT,
                f"instance id {envelope.process!r} ends in '-registry': that id space "
                "belongs to namespace registries",
                pointer="/process",
            )
        definition = await runtime.definition(uow, workflow)
        namespace, kind = definition.namespace, INSTANCE
        reader = await _check_start(uow, envelope.actor, definition, cache)
        version = (await uow.workflows.get(workflow)).latest_version  # type: ignore[union-attr]
    else:
        if envelope.action.name == START:
            raise DomainError(CONFLICT, f"process {envelope.process} already exists")
        reader = await actor_in(uow, envelope.actor, process.namespace, cache)
        if not may_read(reader, entry_token_hash=process.entry_token_hash,
                        started_by=process.started_by):  # fmt: skip
            # Writes need reads: acting on what one may not read is answered exactly
            # like acting on a process that does not exist (nothing about it leaks).
            raise DomainError(NOT_FOUND, f"process {envelope.process} does not exist")
        if process.workflow != workflow:
            raise DomainError(
                INVALID_INPUT,
                f"process {process.id} runs {process.workflow}, not {workflow}",
                pointer="/action/workflow",
            )
        definition = await runtime.definition(uow, process.workflow, process.workflow_version)
        namespace, kind, version = process.namespace, process.kind, process.workflow_version
    if process is not None and process.kind != kind:
        raise DomainError(INVALID_INPUT, f"process {process.id} is not a {kind}")
    actor = reader if reader is not None else await actor_in(uow, envelope.actor, namespace, cache)
    claimed_by = None
    if process is not None:
        state = definition.states.get(process.state)
        if state is not None and state.assigned:
            claimed_by = await uow.processes.claimed_by(process.id)
    ctx = ActContext(
        runtime=runtime,
        uow=uow,
        signed=signed,
        identity=identity,
        now=now,
        actor=actor,
        definition=definition,
        process=process,
        kind=kind,
        namespace=namespace,
        workflow=workflow if process is None else process.workflow,
        version=version,
        claimed_by=claimed_by,
    )
    op = select_op(envelope, registry=registry)
    outcome = await op(ctx)
    written = await write_event(ctx, outcome)
    if cache is not None:
        for other in ctx.touched:  # a parent told of its child's end: its cached row is old
            cache.processes.pop(other, None)
    if cache is not None and op in CACHEABLE_OPS and not ctx.after_event and not ctx.touched:
        cache.processes[written.process.id] = written.process  # nothing else wrote the row
    return written


async def _check_start(
    uow: UnitOfWork, actor_id: str, definition: Definition, cache: ReadCache | None
) -> Actor:
    """The starting actor. `$start` needs a role in the workflow's namespace (or above)
    unless its initial state is public; otherwise the workflow is answered as not
    deployed (nothing leaks)."""
    actor = await actor_in(uow, actor_id, definition.namespace, cache)
    public = definition.states[definition.initial].audience == "public"
    if not public and not may_read(actor):
        raise DomainError(NOT_FOUND, f"workflow {definition.path} is not deployed")
    return actor


async def actor_in(
    uow: UnitOfWork, actor_id: str, namespace: str, cache: ReadCache | None = None
) -> Actor:
    """The actor with the roles it holds in `namespace` (system + every prefix)."""
    roles: frozenset[str] = frozenset()
    if is_public_key(actor_id):
        if cache is not None:
            roles = await cache.roles_in(uow, actor_id, namespace)
        else:
            roles = frozenset(await uow.grants.roles_of(actor_id, namespace))
    return Actor(id=actor_id, roles=roles, visitor=actor_id.startswith("visitor:"))


async def current_roles(runtime: Runtime, actor_id: str, namespace: str) -> frozenset[str] | None:
    """The roles `actor_id` holds in `namespace` now; None once its key is revoked or
    rotated away. One read transaction through the runtime's `GrantCache`: when the cache
    is at the current grants generation that is one primary-key read (`submitEvent`'s
    answer passes this read rule after its commit; it read the token, the key status and
    every grant of the actor before). A transient fault is retried."""

    async def read() -> frozenset[str] | None:
        async with runtime.uow(readonly=True) as uow:
            return await roles_in_force(uow, ReadCache(shared=runtime.grant_cache), actor_id,
                                        namespace)  # fmt: skip

    return await read_retrying(read, what="role read")


async def roles_in_force(
    uow: UnitOfWork, cache: ReadCache, actor_id: str, namespace: str
) -> frozenset[str] | None:
    """The roles `actor_id` holds in `namespace` as `uow` sees them; None when its key is
    revoked or rotated away (`current_roles` in a transaction of its own; the group
    committer at the end of a batch, `ActorRoles`)."""
    status = (await cache.key_statuses(uow, {actor_id}))[actor_id]
    if status is not None and status.status in ("revoked", "rotated"):
        return None
    return await cache.roles_in(uow, actor_id, namespace)


def _check_original_signer(signed: SignedEnvelope, existing: StoredEvent, error: Exception) -> None:
    """A duplicate is answered only to a valid signature by the event's original signer
    (issue 9): anyone may have read an envelope, only its signer can sign it again.
    Otherwise the refusal stands (BAD_SIGNATURE when the signature was what failed)."""
    if signed.signer == existing.signer and verify_signature(
        existing.signer, signed.envelope.canonical(), signed.signature
    ):
        return
    if isinstance(error, DomainError) and error.code == BAD_SIGNATURE:
        raise error
    raise DomainError(
        BAD_SIGNATURE,
        "this event is already recorded under another signature; only its original "
        "signer's signature is answered with it",
        details={"reason": "forged"},
    ) from error


async def _resubmission(
    runtime: Runtime,
    signed: SignedEnvelope,
    identity: str,
    error: Exception,
    *,
    check_nonce: bool = True,
) -> ActResult:
    """After a failure: the original event if this envelope was already applied,
    REPLAYED if its (actor, nonce) was used by another envelope, else the error."""
    [answer] = await resubmissions(runtime, [(signed, identity, error)], check_nonce=check_nonce)
    if isinstance(answer, BaseException):
        raise answer
    return answer


#: One resubmission check: the envelope, its identity, and why it was not applied.
Resubmission = tuple[SignedEnvelope, str, Exception]


async def resubmissions(
    runtime: Runtime, entries: list[Resubmission], *, check_nonce: bool = True
) -> list[ActResult | BaseException]:
    """`_resubmission` for many envelopes in ONE read transaction (the group committer's
    answers to a batch's resent envelopes): per entry, the duplicate result or the error
    to raise, in order."""
    stored = await retry_transient(
        lambda: _stored_originals(runtime, entries, check_nonce),
        what=f"resubmission check of {len(entries)} events",
    )
    out: list[ActResult | BaseException] = []
    for signed, identity, error in entries:
        try:
            out.append(_resubmission_answer(signed, identity, error, stored))
        except DomainError as refusal:
            out.append(refusal)
    return out


@dataclass
class _Stored:
    """What the log holds for a resubmission check: originals by identity, their
    processes, and the (actor, nonce) pairs used by other envelopes."""

    events: dict[str, StoredEvent]
    processes: dict[str, ProcessRecord]
    used: set[tuple[str, str]]


async def _stored_originals(
    runtime: Runtime, entries: list[Resubmission], check_nonce: bool
) -> _Stored:
    """The stored events of these very envelopes, their processes, and (when
    `check_nonce`, or for an entry refused for its nonce) which of the others' (actor,
    nonce) are used by another event."""
    async with runtime.uow(readonly=True) as uow:
        events = await uow.events.originals(
            [(identity, s.envelope.actor, s.envelope.nonce) for s, identity, _ in entries]
        )
        pairs = [
            (signed.envelope.actor, signed.envelope.nonce)
            for signed, identity, error in entries
            if identity not in events and (check_nonce or isinstance(error, NonceConflict))
        ]
        used = await uow.events.used_nonces(pairs) if pairs else set()
        processes = await uow.processes.processes_by_ids({e.process_id for e in events.values()})
    return _Stored(events, processes, used)


def _resubmission_answer(
    signed: SignedEnvelope, identity: str, error: Exception, stored: _Stored
) -> ActResult:
    """One entry's answer from what the log holds (raises its refusal)."""
    existing = stored.events.get(identity)
    if existing is not None:
        _check_original_signer(signed, existing, error)
        record = stored.processes[existing.process_id]
        return ActResult(existing, record.snapshot(), record, None, duplicate=True)
    envelope = signed.envelope
    if (envelope.actor, envelope.nonce) in stored.used or isinstance(error, NonceConflict):
        raise DomainError(
            REPLAYED,
            f"nonce {envelope.nonce} of actor {envelope.actor} was already used for another event",
            details={"actor": envelope.actor, "nonce": envelope.nonce},
        ) from error
    if isinstance(error, DomainError):
        raise error
    raise DomainError(CONFLICT, str(error)) from error
