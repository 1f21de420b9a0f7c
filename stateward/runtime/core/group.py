"""Group commit: one writer task applies queued events, several per transaction.

Per-transaction overhead, not fsync, bounds single-row transactions through async
SQLAlchemy (DESIGN §1), so `act` can hand verified envelopes to this writer
(`Runtime.group_commit = True`). The writer drains what is queued (up to `max_batch`),
opens ONE unit of work and applies them one after the other, then commits once. Each
event stays all-or-nothing: when one is refused, the whole transaction is rolled back,
the refused one is answered alone and the others are applied again as a new batch
(no SAVEPOINT round trips on the happy path). Key
statuses and roles are read once per batch (`ReadCache`, cleared after registry events),
and kept across batches while the grants generation stays the same (`GrantCache`).
Callers get exactly what `act` gives them: the result after the commit, or the error
(resubmissions and REPLAYED resolved as `act` does; attested losers of a seq race are
re-run alone on fresh state).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import IntegrityError

from stateward.domain.errors import DomainError
from stateward.governance.envelope import SignedEnvelope
from stateward.governance.keys import is_public_key
from stateward.governance.sigworker import MIN_BATCH, SignatureWorker, worker_enabled
from stateward.observe import metrics, tracing
from stateward.observe.act import record_answer
from stateward.persistence import PersistenceConflict, SeqConflict
from stateward.persistence.errors import is_transient
from stateward.persistence.retry import TRANSIENT_ATTEMPTS, describe, pause_before
from stateward.persistence.writebuffer import AlreadyStored, BufferedWriteFailed
from stateward.records import REGISTRY
from stateward.runtime.core.act import (
    ActorRoles,
    ActResult,
    ReadCache,
    act,
    act_verified,
    apply_in,
    automate_committed,
    op_label,
    publish_committed,
    resubmissions,
    result_of,
    roles_in_force,
    verify_known,
)
from stateward.runtime.core.idempotency import is_keyed
from stateward.runtime.core.services import Runtime
from stateward.runtime.core.writes import Written

log = logging.getLogger(__name__)
MAX_BATCH = 64
#: Seconds after a batch held resubmissions during which SQLite batches look them up
#: before they are applied (else the commit's tail finds them, after a run in vain).
PRECHECK_AFTER_RESUBMISSION = 2.0


@dataclass
class _Slot:
    """An `act_many` item's place in its bundle: `ready` is resolved once this item and
    every item before it is queued or answered without the writer; `before` is the
    previous item's `ready` (None for the first)."""

    ready: asyncio.Future[None]
    before: asyncio.Future[None] | None


#: Set by `act_many` in each of its events' contexts (`GroupCommitter.submit` queues the
#: event only once `before` is resolved, then resolves `ready`).
_SLOT: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar(
    "stateward_bundle_slot", default=None
)


@dataclass
class _Item:
    signed: SignedEnvelope
    identity: str
    attested: bool
    future: asyncio.Future[ActResult]
    written: Written | None = None
    error: Exception | None = field(default=None, repr=False)
    trace: Any = field(default_factory=tracing.current, repr=False)  # the caller's context
    #: Its actor's roles at the batch's commit (an envelope signed by its own actor).
    roles: ActorRoles | None = field(default=None, repr=False)
    #: The item of the same envelope queued before it in its batch (answered alike).
    first: _Item | None = field(default=None, repr=False)


class GroupCommitter:
    """The single writer of a runtime (per event loop): `await submit(...)`."""

    def __init__(self, runtime: Runtime, max_batch: int = MAX_BATCH) -> None:
        self.runtime = runtime
        self.max_batch = max_batch
        self.batches = 0
        self.events = 0
        #: Batches run again after a transient fault / applied one by one after a failure.
        self.retried = 0
        self.fallbacks = 0
        #: Batches applied again without the write buffer (a queued row was refused).
        self.unbuffered = 0
        #: Events taken out of a batch because the log held them already (resubmissions).
        self.resubmitted = 0
        self._resubmissions_at = float("-inf")
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        #: `hold()`ers queueing a bundle (`act_many`): the writer starts no batch meanwhile,
        #: then takes at least what they queued in one batch.
        self._holds = 0
        self._released = asyncio.Event()
        self._released.set()
        self._bundle = 0
        self._finishing: set[asyncio.Task[None]] = set()
        #: The helper process checking `act_many`'s signatures (started on first use).
        self.signatures: SignatureWorker | None = None
        self._task = self._loop.create_task(self._run(), name="stateward-group-commit")

    async def submit(self, signed: SignedEnvelope, identity: str, *, attested: bool) -> ActResult:
        """Queue a verified envelope and wait for its committed result (or its error)."""
        future: asyncio.Future[ActResult] = self._loop.create_future()
        slot = _SLOT.get()
        if slot is not None:
            _SLOT.set(None)  # one event per slot (nothing this task starts later inherits it)
            if slot.before is not None and not slot.before.done():
                # an earlier item of the bundle is still on its way (a read before the
                # writer): queueing now would let this one overtake it
                await asyncio.wait((slot.before,))  # (not cancelled with this task)
        self._queue.put_nowait(_Item(signed, identity, attested, future))
        if slot is not None:
            _resolve(slot.ready)
        return await future

    def queue_now(
        self, signed: SignedEnvelope, verdict: bool | None, *, attested: bool
    ) -> asyncio.Future[ActResult] | None:
        """`act` up to `submit`, in this call and without a task of its own, for an
        envelope that needs no read before the writer (not keyed, its checks pass against
        the signers known now): queued, and the future of its answer returned (the act
        metric is recorded when it is answered, as `observed_act` does). None, with nothing
        done, for any other envelope: the caller runs `act` for it (a refusal is answered
        there after its resubmission check, an unknown signer refreshed). Only while
        tracing is off (`act`'s spans need its task's context)."""
        envelope = signed.envelope
        if is_keyed(envelope):
            return None
        runtime = self.runtime
        op = op_label(signed)
        started = time.perf_counter()
        try:
            identity = envelope.identity()
            verify_known(runtime, signed, runtime.clock.now(), own=attested, checked=verdict)
        except Exception:
            return None
        future: asyncio.Future[ActResult] = self._loop.create_future()
        self._queue.put_nowait(_Item(signed, identity, attested, future, trace=None))
        future.add_done_callback(functools.partial(record_answer, op, started))
        return future

    def hold(self) -> None:
        """Start queueing a bundle: no batch starts until the matching `release()`."""
        self._holds += 1
        self._released.clear()

    def release(self) -> None:
        """End a `hold()`: the next batch takes at least everything queued so far."""
        self._holds -= 1
        if self._holds == 0:
            self._bundle = max(self._bundle, self._queue.qsize())
            self._released.set()

    @property
    def queued(self) -> int:
        """Events waiting for the writer."""
        return self._queue.qsize()

    async def close(self) -> None:
        """Stop the writer (queued callers get a CancelledError) and the signature worker."""
        if self.signatures is not None:
            self.signatures.close()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, RuntimeError):
            await self._task
        while not self._queue.empty():
            self._queue.get_nowait().future.cancel()

    async def _run(self) -> None:
        while True:
            items = [await self._queue.get()]
            if not self._released.is_set():
                await self._released.wait()
            # a released bundle is taken whole (the first item may be one of it)
            limit, self._bundle = max(self.max_batch, len(items) + self._bundle), 0
            while len(items) < limit and not self._queue.empty():
                items.append(self._queue.get_nowait())
            try:
                await self._batch(items)
            except Exception as error:  # never leave a caller waiting
                log.exception("group commit batch failed")
                for item in items:
                    if not item.future.done():
                        item.future.set_exception(error)

    async def _batch(self, items: list[_Item]) -> None:
        """Apply `items` in one transaction. When one is refused, the transaction is
        rolled back and the others form a new batch (a refused event never leaves a
        partial write behind); the refused ones are answered after the commit, so a
        resubmission of an envelope of the same batch finds its original. A transient
        database fault runs the batch again (`retry.TRANSIENT_ATTEMPTS` times); any other
        failure of the transaction applies the events one by one, and says why."""
        runtime = self.runtime
        items, refused = _first_of_each(items)
        faults = 0
        buffered = True  # off after a queued row was refused (`persistence/writebuffer`)
        while items:
            now = runtime.clock.now()
            failed: _Item | None = None
            try:
                async with runtime.uow() as uow:
                    if buffered:  # one event alone too: its rows go with the tail
                        uow.buffer_writes()
                    cache = ReadCache(shared=runtime.grant_cache)
                    # Lock order step 1: every existing process of the batch, by id.
                    await cache.prefetch(
                        runtime, uow, [item.signed.envelope.process for item in items]
                    )
                    if len(items) > 1 and (
                        uow.dialect == "postgresql"
                        or time.monotonic() - self._resubmissions_at < PRECHECK_AFTER_RESUBMISSION
                    ):
                        # resubmissions first (SQLite: in the commit's tail, no round trip of
                        # its own, unless some came lately: one round trip, not two runs)
                        stored = await uow.events.stored_keys([_key(item) for item in items])
                        if stored:
                            raise AlreadyStored(stored)
                    for item in items:
                        try:
                            with tracing.attached(item.trace), tracing.span("act.engine"):
                                item.written = await apply_in(
                                    runtime, uow, item.signed, item.identity, now, cache=cache
                                )
                        except (DomainError, PersistenceConflict, IntegrityError) as error:
                            item.error, failed = error, item
                            break
                        if item.written.process.kind == REGISTRY or item.written.children:
                            cache.clear()
                    if failed is None:
                        await _roles_at_commit(uow, cache, items)
                        committing = time.time_ns()
                        await uow.commit()
                        tracing.record_span(
                            "act.commit", committing, time.time_ns(), (i.trace for i in items)
                        )
            except AlreadyStored as error:
                # Envelopes applied before (a client catching up sends some again): the
                # batch again without them, still buffered; they are answered as
                # resubmissions after its commit (duplicate, or REPLAYED).
                again = [item for item in items if item.identity not in error.identities]
                for item in items:
                    item.written, item.error = None, None
                if len(again) == len(items):  # nothing of this batch: never loop on it
                    buffered = False
                    self.unbuffered += 1
                    continue
                for item in items:
                    if item.identity in error.identities:
                        item.error = error
                        refused.append(item)
                self.resubmitted += len(items) - len(again)
                self._resubmissions_at = time.monotonic()
                items = again
                continue
            except BufferedWriteFailed as error:
                # No event can be blamed for a queued row: apply them again unbuffered,
                # where each one's own statements answer for it.
                log.info("group commit of %d events: %s; applying them again unbuffered",
                         len(items), error)  # fmt: skip
                for item in items:
                    item.written, item.error = None, None
                buffered = False
                self.unbuffered += 1
                continue
            except Exception as error:
                for item in items:
                    item.written, item.error = None, None
                if is_transient(error) and faults < TRANSIENT_ATTEMPTS:
                    faults += 1
                    self.retried += 1
                    log.info("group commit of %d events: transient database fault (%s); "
                             "retry %d", len(items), describe(error), faults)  # fmt: skip
                    await asyncio.sleep(pause_before(faults))
                    continue
                self.fallbacks += 1
                log.warning(
                    "group commit failed (%s); applying %d events one by one",
                    describe(error),
                    len(items) + len(refused),
                    exc_info=not is_transient(error),
                )
                for item in items + refused:
                    item.written, item.error = None, None
                    await self._alone(item)
                return
            if failed is None:
                break
            refused.append(failed)
            items = [item for item in items if item is not failed]
            for item in items:
                item.written, item.error = None, None
        self.batches += 1
        self.events += len(items)
        metrics.record_batch(len(items))
        committed = [item for item in items if item.written is not None]
        if committed:
            # Publishing and automation run outside the writer (an automated `$automate`
            # event is itself submitted here, and the writer must not wait on itself):
            # ONE task for the whole batch, which answers each caller after its publish.
            self._spawn(self._finish(committed))
        answers = []
        for item in refused:
            if isinstance(item.error, SeqConflict) and item.attested:
                await self._alone(item)  # on fresh state, before the next batch
            else:
                answers.append(item)
        if answers:  # reads only: off the writer's path
            self._spawn(self._answer_resubmissions(answers))

    def _spawn(self, work: Any) -> None:
        task = self._loop.create_task(work)
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)

    async def _answer_resubmissions(self, items: list[_Item]) -> None:
        """Answer events the batch did not commit as `act` would after such a failure:
        the stored original of an envelope applied before (duplicate), REPLAYED for a
        used (actor, nonce), else the error. After the commit, so an envelope sent twice
        in one batch finds its original; a repeat whose first was refused gets its
        error."""
        lookups = [item for item in items if item.first is None]
        repeats = [item for item in items if item.first is not None]
        if lookups:
            _answer(lookups, await _resubmissions_of(self.runtime, lookups))
        if repeats:
            await asyncio.wait({item.first.future for item in repeats if item.first is not None})
        found: list[_Item] = []  # repeats of committed firsts: their originals, one read
        for item in repeats:
            assert item.first is not None
            if item.first.future.cancelled():
                item.future.cancel()
            elif (failure := item.first.future.exception()) is not None:
                _answer([item], [failure])
            else:
                found.append(item)
        if found:
            _answer(found, await _resubmissions_of(self.runtime, found))

    async def _finish(self, items: list[_Item]) -> None:
        """After the commit: publish the batch's bus messages in one call (in commit
        order), then answer each caller; an event with automation hooks or message
        deliveries gets its own task for those (`automate_committed`) and is
        answered when they are done, so one slow hook delays no other answer."""
        try:
            publishing = time.time_ns()
            await publish_committed(
                self.runtime, [row for item in items for row in _written(item).outbox]
            )
            tracing.record_span("act.publish", publishing, time.time_ns(), (i.trace for i in items))
        finally:
            for item in items:
                written = _written(item)
                if written.hooks or written.messages:
                    self._spawn(self._automate(item, written))
                elif not item.future.done():
                    item.future.set_result(result_of(written, item.roles))

    async def _automate(self, item: _Item, written: Written) -> None:
        """The automation and deliveries of one committed event, then its answer."""
        try:
            with tracing.attached(item.trace):
                await automate_committed(self.runtime, written)
        finally:
            if not item.future.done():
                item.future.set_result(result_of(written, item.roles))

    async def _alone(self, item: _Item) -> None:
        try:
            with tracing.attached(item.trace):
                result = await act_verified(
                    self.runtime,
                    item.signed,
                    item.identity,
                    self.runtime.clock.now(),
                    attested=item.attested,
                )
        except BaseException as error:
            item.future.set_exception(error)
        else:
            item.future.set_result(result)


async def _resubmissions_of(runtime: Runtime, items: list[_Item]) -> list[Any]:
    """`act.resubmissions` for `items` (a failed read is every item's answer)."""
    try:
        return await resubmissions(
            runtime, [(i.signed, i.identity, i.error or Exception()) for i in items]
        )
    except BaseException as error:
        return [error] * len(items)


def _answer(items: list[_Item], answers: list[Any]) -> None:
    """Resolve each item's future with its answer (an exception is raised to it)."""
    for item, answer in zip(items, answers, strict=True):
        if item.future.done():
            continue
        if isinstance(answer, BaseException):
            item.future.set_exception(answer)
        else:
            item.future.set_result(answer)


def _first_of_each(items: list[_Item]) -> tuple[list[_Item], list[_Item]]:
    """`items` without the repeats of an envelope queued twice (the same identity),
    and the repeats: answered after the commit as resubmissions of the first."""
    seen: dict[str, _Item] = {}
    first: list[_Item] = []
    repeats: list[_Item] = []
    for item in items:
        earlier = seen.setdefault(item.identity, item)
        if earlier is item:
            first.append(item)
        else:
            item.first = earlier
            repeats.append(item)
    return first, repeats


def _key(item: _Item) -> tuple[str, str, str]:
    """An item's (identity, actor, nonce), as `EventRepository.stored_keys` takes them."""
    envelope = item.signed.envelope
    return item.identity, envelope.actor, envelope.nonce


async def _roles_at_commit(uow: Any, cache: ReadCache, items: list[_Item]) -> None:
    """For each event signed by its own actor (a client-signed envelope), that actor's
    roles in the event's process namespace as this transaction sees them after its last
    write — what a read right after the commit would answer, read at the commit instead:
    the answer's read rule (`resolvers/writes._answer`) needs no transaction of its own.
    One lookup per (actor, namespace), through the batch's caches (no statement unless a
    registry event of the batch cleared them)."""
    found: dict[tuple[str, str], ActorRoles] = {}
    for item in items:
        signed, written = item.signed, item.written
        actor = signed.envelope.actor
        item.roles = None
        if written is None or signed.signer != actor or not is_public_key(actor):
            continue
        key = (actor, written.process.namespace)
        roles = found.get(key)
        if roles is None:
            held = await roles_in_force(uow, cache, actor, key[1])
            roles = found[key] = ActorRoles(actor, key[1], held)
        item.roles = roles


def _written(item: _Item) -> Written:
    assert item.written is not None
    return item.written


def committer_of(runtime: Runtime) -> GroupCommitter:
    """The runtime's writer on the running loop (started on first use)."""
    committer = runtime.committer
    loop = asyncio.get_running_loop()
    if committer is None or committer._loop is not loop or committer._task.done():
        committer = runtime.committer = GroupCommitter(runtime)
    assert isinstance(committer, GroupCommitter)
    return committer


async def act_many(
    runtime: Runtime, items: list[SignedEnvelope], *, attested: bool = False
) -> list[ActResult | BaseException]:
    """`act` for each envelope, in list order, in one group-commit batch when possible.

    Each event stays all-or-nothing on its own (a refused one is answered with its error
    and changes nothing; the others are applied): the answer is, per item, its `ActResult`
    or the exception `act` raised. Items are queued in list order (so events of one
    process apply in list order) while the writer is held — those that need no read
    before the writer in this call, without a task each while tracing is off
    (`GroupCommitter.queue_now`); from the first one that does, `act` runs for it and
    every later item, all in one loop turn, and an item still on its way holds back the
    queueing of every later one until it is queued or answered — then the writer takes
    them all in one transaction. Without group commit: one after the other.
    """
    if not runtime.group_commit:
        results: list[ActResult | BaseException] = []
        for signed in items:
            try:
                results.append(await act(runtime, signed, attested=attested))
            except Exception as error:
                results.append(error)
        return results
    committer = committer_of(runtime)
    loop = asyncio.get_running_loop()
    verdicts = await _signature_verdicts(committer, items, attested=attested)
    answers: list[asyncio.Future[ActResult]] = []
    before: asyncio.Future[None] | None = None
    lean = not tracing.enabled()
    committer.hold()
    try:
        for signed, verdict in zip(items, verdicts, strict=True):
            if lean:
                # every item before this one is queued: queue this one now, in order
                queued = committer.queue_now(signed, verdict, attested=attested)
                if queued is not None:
                    answers.append(queued)
                    continue
                lean = False  # this item and every later one take `act`'s path, chained
            slot = _Slot(loop.create_future(), before)
            context = contextvars.copy_context()
            context.run(_SLOT.set, slot)
            work = act(runtime, signed, attested=attested, signature_ok=verdict)
            task = loop.create_task(work, context=context)
            task.add_done_callback(functools.partial(_answered, slot))
            answers.append(task)
            before = slot.ready
        # Every task's first step runs before this one resumes (FIFO ready queue), in
        # list order, and an envelope that needs no read before the writer is queued in
        # it: one bare yield for the whole bundle. An item still on its way holds back
        # every later item's queueing (`submit` waits for its `before`), so list order
        # stays; the writer stays held until the last item is queued or answered.
        if before is not None:
            await asyncio.sleep(0)
            if not before.done():
                await asyncio.wait((before,))
    finally:
        committer.release()
    return list(await asyncio.gather(*answers, return_exceptions=True))


def _answered(slot: _Slot, task: asyncio.Task[ActResult]) -> None:
    """An item's task ended (answered, perhaps without the writer): its slot is ready as
    soon as every earlier item's is (an item that never reached `submit` must not let a
    later one overtake an earlier one still on its way)."""
    before = slot.before
    if before is None or before.done():
        _resolve(slot.ready)
    else:
        before.add_done_callback(lambda _: _resolve(slot.ready))


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _signature_verdicts(
    committer: GroupCommitter, items: list[SignedEnvelope], *, attested: bool
) -> list[bool | None]:
    """Each envelope's `verify_signature` verdict, checked in the signature worker's
    process while this loop serves others (`governance/sigworker.py`): for client-signed
    batches of `MIN_BATCH` or more on a machine with a second core. None per item: `act`
    checks it itself (small batches, server-attested ones, no worker)."""
    if attested or len(items) < MIN_BATCH or not worker_enabled():
        return [None] * len(items)
    if committer.signatures is None:
        committer.signatures = SignatureWorker()
    found = await committer.signatures.check(
        [(s.signer, s.envelope.canonical(), s.signature) for s in items]
    )
    return [None] * len(items) if found is None else list(found)
