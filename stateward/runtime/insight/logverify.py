"""Verifying the deployment log as a whole: offline from an export, and the Merkle
part against a live database.

`verify_log(log, checkpoint)` needs no database: for every event in log-index order it
checks the index (gap-free), the envelope (canonical, agrees with the line), the
per-process hash chain, the signature (signer = actor or a trusted node key; keys
revoked or rotated earlier in the log refused), and replays each process through the
engine with the definitions the registry events deployed. Then the Merkle root of the
first `size` leaves is checked against every checkpoint in the file and, given one saved
earlier, against that one: a log that lost events fails, naming the first missing log
index. `TreeWalk` is the Merkle part, shared with `verify --db --checkpoint`.

Log-level findings use process `log` and the log index as `seq`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from stateward.domain import merkle
from stateward.domain.bootstrap import bootstrap_definition
from stateward.domain.definition import load_definition
from stateward.domain.errors import DomainError
from stateward.domain.logformat import event_leaf, event_leaf_hash
from stateward.domain.migration import MIGRATE, migrate
from stateward.domain.model import Actor, Definition, Outcome, ProcessSnapshot
from stateward.domain.paths import SYSTEM_NAMESPACE, registry_id
from stateward.domain.versionhash import apply_order
from stateward.governance.chain import GENESIS_PREV, event_hash
from stateward.governance.checkpoint import SignedCheckpoint, parse_checkpoint, verify_checkpoint
from stateward.governance.envelope import (
    Envelope,
    SignedEnvelope,
    StoredFields,
    stored_fields,
)
from stateward.governance.keys import is_public_key, verify_signature
from stateward.governance.node_trust import NodeTrust, admin_of, is_genesis, node_change
from stateward.governance.verification import verify_envelope
from stateward.runtime.core.kernel import evaluate, replay_name
from stateward.runtime.insight.logfile import LogEvent, LogFile, no_gc
from stateward.runtime.insight.verify import (
    BAD_SIGNATURE,
    ENVELOPE_MISMATCH,
    NODE_TRUST_FORBIDDEN,
    NOT_FOUND,
    REPLAY_FAILED,
    VerificationProblem,
    VerificationReport,
)

LOG = "log"
LOG_GAP = "LOG_GAP"
LOG_TRUNCATED = "LOG_TRUNCATED"
CHECKPOINT_MISMATCH = "CHECKPOINT_MISMATCH"
BAD_CHECKPOINT = "BAD_CHECKPOINT"
LEAF_MISMATCH = "LEAF_MISMATCH"
UNLOGGED_EVENT = "UNLOGGED_EVENT"
SEQ_GAP = "SEQ_GAP"
PREV_HASH_MISMATCH = "PREV_HASH_MISMATCH"
HASH_MISMATCH = "HASH_MISMATCH"

_sha256 = hashlib.sha256
_NODE = merkle.NODE_PREFIX


class TreeWalk:
    """Rebuilds the tree leaf by leaf and checks checkpoints against it."""

    def __init__(self, report: VerificationReport, sizes: Iterable[int] = ()) -> None:
        self.report = report
        self.frontier: list[bytes] = []
        self.size = 0
        self.first_gap: int | None = None
        self.wanted = set(sizes)
        self.roots: dict[int, str] = {0: merkle.EMPTY_ROOT.hex()}

    def problem(self, index: int, code: str, message: str) -> None:
        self.report.problems.append(VerificationProblem(LOG, index, code, message))

    def add(self, index: int, leaf: bytes) -> None:
        """The next leaf, found at `index` (a gap is reported once, where it starts)."""
        if index != self.size:
            if self.first_gap is None or index > self.size:
                self.problem(
                    self.size,
                    LOG_GAP,
                    f"log index {self.size} is missing (the next leaf found is {index})",
                )
            self.first_gap = self.size if self.first_gap is None else self.first_gap
        # merkle.append, in place: each completed right child folds into its parent
        frontier, node, at = self.frontier, leaf, self.size
        while at & 1:
            node = _sha256(_NODE + frontier.pop() + node).digest()
            at >>= 1
        frontier.append(node)
        self.size += 1
        if self.size in self.wanted:
            self.roots[self.size] = merkle.root_from_frontier(self.frontier).hex()

    @property
    def root(self) -> str:
        """The root over every leaf added."""
        return merkle.root_from_frontier(self.frontier).hex()

    def check(self, checkpoint: SignedCheckpoint, what: str) -> None:
        """Does this log contain the tree `checkpoint` signed (same first `size` leaves)?"""
        first_missing = self.first_gap if self.first_gap is not None else self.size
        if checkpoint.size > self.size:
            self.problem(
                first_missing,
                LOG_TRUNCATED,
                f"{what} covers {checkpoint.size} leaves but the log has {self.size}: "
                f"first missing log index {first_missing}",
            )
            return
        root = self.roots.get(checkpoint.size)
        if root != checkpoint.root:
            where = (
                f"first missing log index {self.first_gap}"
                if self.first_gap is not None and self.first_gap < checkpoint.size
                else "an event before it was changed, removed or reordered"
            )
            self.problem(
                min(first_missing, checkpoint.size),
                CHECKPOINT_MISMATCH,
                f"the first {checkpoint.size} leaves hash to {str(root)[:16]}…, {what} "
                f"says {checkpoint.root[:16]}… ({where})",
            )


@dataclass
class _Process:
    kind_registry: bool
    definition: Definition | None
    snapshot: ProcessSnapshot | None = None
    seq: int = 0
    head: str = GENESIS_PREV
    broken: bool = False


@dataclass
class OfflineVerifier:
    """State of one offline verification (see the module docstring)."""

    log: LogFile
    report: VerificationReport = field(default_factory=VerificationReport)
    processes: dict[str, _Process] = field(default_factory=dict)
    definitions: dict[tuple[str, int], Definition] = field(default_factory=dict)
    latest: dict[str, int] = field(default_factory=dict)
    revoked_at: dict[str, int] = field(default_factory=dict)
    trust: NodeTrust = field(default_factory=NodeTrust)
    #: `trust.current()` until the next trust change.
    _trusted: frozenset[str] | None = None
    _actors: dict[str, Actor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.trust = NodeTrust(legacy=self.log.legacy_nodes)

    def problem(self, process: str, seq: int, code: str, message: str) -> None:
        self.report.problems.append(VerificationProblem(process, seq, code, message))

    def run(
        self, given: SignedCheckpoint | None, workers: int = 1, parallel_from: int = 0
    ) -> VerificationReport:
        sizes = [c.size for c in self.log.checkpoints] + ([given.size] if given else [])
        tree = TreeWalk(self.report, sizes)
        parallel = workers if len(self.log.events) >= parallel_from else 1
        with no_gc(), _EventChecks(self.log.events, parallel) as checks:
            for event, checked in zip(self.log.events, checks, strict=True):
                tree.add(event.index, checked[LEAF])
                self.event(event, checked)
        self.report.events_checked = len(self.log.events)
        self.report.processes_checked = len(self.processes)
        trusted = frozenset(self.trust.ever)
        for n, cp in enumerate(self.log.checkpoints):
            self._checkpoint(tree, cp, f"checkpoint #{n + 1} of the file", trusted)
        if given is not None:
            self._checkpoint(tree, given, "the given checkpoint", trusted)
        return self.report

    def _checkpoint(
        self, tree: TreeWalk, cp: SignedCheckpoint, what: str, trusted: frozenset[str]
    ) -> None:
        try:
            verify_checkpoint(cp, net=self.log.net, trusted=trusted)
        except DomainError as exc:
            tree.problem(cp.size, BAD_CHECKPOINT, f"{what}: {exc.message}")
            return
        tree.check(cp, what)

    # ------------------------------------------------------------------ one event

    def event(self, event: LogEvent, checked: Checked | None = None) -> None:
        """One event, in log order; `checked` is `check_event(event)` when done ahead."""
        if checked is None:
            checked = check_event(event)
        fields, unreadable, flags, _leaf, identity = checked
        process, seq = event.process, event.seq
        if fields is None:
            self.problem(process, seq, ENVELOPE_MISMATCH, unreadable)
        else:
            if not flags & CANONICAL:
                self.problem(process, seq, ENVELOPE_MISMATCH, "envelope is not canonical")
            if fields[1] != process:
                self.problem(process, seq, ENVELOPE_MISMATCH, "envelope names another process")
        state = self.processes.get(process)
        if state is None:
            state = self._open(event, fields)
            self.processes[process] = state
        if seq != state.seq + 1:
            self.problem(process, seq, SEQ_GAP, f"expected seq {state.seq + 1}")
        if event.prev_hash != state.head:
            self.problem(process, seq, PREV_HASH_MISMATCH, "prev_hash breaks the chain")
        if not flags & HASH_OK:
            self.problem(process, seq, HASH_MISMATCH, "hash differs from the recomputed one")
        state.seq, state.head = seq, event.hash
        if fields is None:
            state.broken = True
            return
        self._signature(event, fields, bool(flags & SIGNATURE_OK))
        if not state.broken and state.definition is not None:
            self._replay(state, event, fields, identity)

    def _open(self, event: LogEvent, fields: StoredFields | None) -> _Process:
        workflow = fields[3] if fields else ""
        if workflow.endswith("/bootstrap"):
            namespace = workflow.rsplit("/", 1)[0]
            return _Process(True, bootstrap_definition(namespace))
        version = event.version or self.latest.get(workflow)
        definition = self.definitions.get((workflow, version or 0))
        if definition is None and fields is not None:
            self.problem(
                event.process, event.seq, NOT_FOUND,
                f"{workflow} v{version} was not deployed earlier in the log",
            )  # fmt: skip
        return _Process(False, definition)

    def _signature(self, event: LogEvent, fields: StoredFields, signature_ok: bool) -> None:
        """`verify_envelope` of the event against the trust and revocations at this point
        of the log. The common case — a valid signature for this deployment by the actor
        itself or a trusted node, neither key revoked — is accepted here as
        `verify_envelope` would accept it; anything else goes through it (its message)."""
        net, _process, _name, _workflow, _input, actor, _ts, _nonce = fields
        signer = event.signer
        if self._trusted is None:
            self._trusted = self.trust.current()
        if (
            signature_ok
            and net == self.log.net
            and (
                signer in self._trusted
                or (signer == actor and is_public_key(actor))
                or is_genesis(event.process, event.seq)
            )
            and signer not in self.revoked_at
            and actor not in self.revoked_at
        ):
            return

        def revoked(key: str, _ts: str) -> bool:
            at = self.revoked_at.get(key)
            return at is not None and event.index > at

        try:
            verify_envelope(
                SignedEnvelope(Envelope.from_fields(fields, b""), signer, event.signature),
                net=self.log.net,
                now=None,
                trusted_signers=self.trust.signers_for(event.process, event.seq, signer),
                revoked=revoked,
                signature_ok=signature_ok,
            )
        except DomainError as exc:
            self.problem(event.process, event.seq, BAD_SIGNATURE, exc.message)

    def _actor(self, actor_id: str) -> Actor:
        actor = self._actors.get(actor_id)
        if actor is None:
            actor = Actor(id=actor_id, visitor=actor_id.startswith("visitor:"))
            self._actors[actor_id] = actor
        return actor

    def _replay(
        self, state: _Process, event: LogEvent, fields: StoredFields, identity: str
    ) -> None:
        assert state.definition is not None
        _net, process, action, workflow, input, actor_id, ts, _nonce = fields
        before = state.snapshot
        name = replay_name(action, event.action)
        actor = self._actor(actor_id)
        change = node_change(process, name, input)
        if change is not None and not admin_of(before.data if before else None, actor.id):
            self.problem(
                event.process, event.seq, NODE_TRUST_FORBIDDEN,
                f"{name} by {actor.id}, who is not a system admin",
            )  # fmt: skip
            change = None
        try:
            if name == MIGRATE and before is not None and not state.kind_registry:
                outcome = self._migrate(state, before, fields)
            else:
                outcome = evaluate(
                    state.definition, before, name=name, input=input,
                    actor=actor, ts=ts, event_id=identity,
                    process_id=process, authorize=False,
                )  # fmt: skip
        except DomainError as exc:
            self.problem(event.process, event.seq, REPLAY_FAILED, f"{exc.code}: {exc.message}")
            state.broken = True
            return
        chain = (before.automation_chain + 1 if before else 1) if name == "$automate" else 0
        snapshot = _snapshot(
            process,
            workflow,
            event.version or (before.version if before else 1),
            outcome.state,
            outcome.status,
            outcome.data,
            before.started_by if before else actor_id,
            chain,
        )
        state.snapshot = snapshot
        if change is not None:
            self.trust.apply(*change)
            self._trusted = None
        if state.kind_registry:
            self._governance(event, fields)

    def _migrate(self, state: _Process, before: ProcessSnapshot, fields: StoredFields) -> Outcome:
        """Replay a `$migrate`: the outcome, and the process runs the target from now on."""
        assert state.definition is not None
        _net, _process, _name, workflow, input, _actor, ts, _nonce = fields
        version = input.get("toVersion")
        target = self.definitions.get((workflow, version if isinstance(version, int) else 0))
        if target is None:
            raise DomainError(
                NOT_FOUND, f"{workflow} v{version} was not deployed earlier in the log"
            )
        outcome = migrate(state.definition, target, before, input, ts)
        state.definition = target
        return outcome

    def _governance(self, event: LogEvent, fields: StoredFields) -> None:
        """What a replayed registry event changes for later events: definitions, keys."""
        _net, process, name, _workflow, input, actor, _ts, _nonce = fields
        if name in ("add_workflow", "update_workflow"):
            source: dict[str, Any] = apply_order(input["definition"], input.get("order"))
            path = str(source["$path"])
            version = self.latest.get(path, 0) + 1
            try:
                self.definitions[(path, version)] = load_definition(source)
            except DomainError as exc:
                self.problem(event.process, event.seq, REPLAY_FAILED, f"{path}: {exc.message}")
                return
            self.latest[path] = version
        elif process == registry_id(SYSTEM_NAMESPACE):
            if name == "rotate_key":
                self.revoked_at.setdefault(actor, event.index)
            elif name == "revoke_key" and isinstance(input.get("key"), str):
                self.revoked_at.setdefault(input["key"], event.index)


def _snapshot(
    id: str,
    workflow: str,
    version: int,
    state: str,
    status: str,
    data: Mapping[str, Any],
    started_by: str | None,
    automation_chain: int,
) -> ProcessSnapshot:
    """`ProcessSnapshot(...)` (no claim, no parent data) without its frozen `__init__`
    (ten `object.__setattr__` calls, ≈ 1 µs of the replaying thread's few per event)."""
    snapshot: ProcessSnapshot = object.__new__(ProcessSnapshot)
    object.__setattr__(
        snapshot,
        "__dict__",
        {
            "id": id,
            "workflow": workflow,
            "version": version,
            "state": state,
            "status": status,
            "data": data,
            "started_by": started_by,
            "claimed_by": None,
            "automation_chain": automation_chain,
            "parent_data": None,
        },
    )
    return snapshot


#: What `check_event` found about one event, by position. A plain tuple of plain values
#: (building class instances per event costs more than the replay's use of them): the
#: envelope's fields `(net, process, name, workflow, input, actor, ts, nonce)` or None
#: when unreadable, why it is unreadable, the flags (`CANONICAL`: its text is its RFC
#: 8785 form; `HASH_OK`: the chain hash recomputes; `SIGNATURE_OK`: the signature
#: verifies over the canonical bytes), the Merkle leaf hash and the envelope's identity.
Checked = tuple[StoredFields | None, str, int, bytes, str]
#: Where the leaf hash is in a `Checked`.
LEAF: Final = 3
CANONICAL: Final = 1
HASH_OK: Final = 2
SIGNATURE_OK: Final = 4


def check_event(event: LogEvent) -> Checked:
    """Everything about one event that depends on that event alone: the envelope parse
    and shape checks, the chain hash, the leaf hash and the Ed25519 check. Pure, so
    worker threads run it ahead of the replay (which needs the events before). The
    envelope is read once: `stored_fields` proves the common case (canonical text, every
    shape check of `Envelope.from_stored`) in one orjson pass; anything else is decided
    by `from_stored` itself."""
    text = event.envelope
    raw = text.encode("utf-8")
    flags = HASH_OK if event_hash(event.prev_hash, raw, event.signature) == event.hash else 0
    leaf = event_leaf(event.process, event.seq, event.signer, event.hash)
    fields = stored_fields(text, raw)
    if fields is not None:
        canonical = raw
        flags |= CANONICAL
    else:
        try:
            envelope = Envelope.from_stored(text)
        except DomainError as exc:
            return (None, f"unreadable: {exc}", flags, leaf, "")
        canonical = envelope.canonical()
        action = envelope.action
        fields = (
            envelope.net, envelope.process, action.name, action.workflow, action.input,
            envelope.actor, envelope.ts, envelope.nonce,
        )  # fmt: skip
        if canonical == raw:
            flags |= CANONICAL
    if verify_signature(event.signer, canonical, event.signature):
        flags |= SIGNATURE_OK
    return (fields, "", flags, leaf, _sha256(canonical).hexdigest())


def verify_log(
    log: LogFile,
    checkpoint: SignedCheckpoint | None = None,
    *,
    workers: int | None = None,
    parallel_from: int = 2000,
) -> VerificationReport:
    """Verify an exported log with no database (see the module docstring). For logs of
    `parallel_from` events or more, the per-event checks that need no earlier event
    (`check_event`: envelope, chain hash, leaf hash, signature) run ahead in `workers`
    threads (default: the CPUs, at most 4) while this one replays in log order. The
    findings, and their order, are the same whatever the number of workers."""
    if workers is None:
        workers = min(os.cpu_count() or 1, 4)
    return OfflineVerifier(log).run(checkpoint, workers, parallel_from)


#: Events per task handed to a worker (small enough that the replay starts early).
CHUNK = 500


def _check_range(events: list[LogEvent], start: int, end: int) -> list[Checked]:
    """Worker: `check_event` of events[start:end]."""
    return [check_event(e) for e in events[start:end]]


class _EventChecks:
    """`check_event` of every event, in log order: done ahead by worker threads, chunk
    by chunk, while the caller replays; inline when `workers` < 2 or no thread can be
    started. Iterating yields one `Checked` per event.

    Threads, not processes: most of `check_event` is libsodium's Ed25519 check, and cffi
    releases the GIL around it, so the checks of two threads and the replay run at once.
    Processes cost more CPU for the same work (the forked pages each side then writes are
    copied — ≈ 5 µs per event in system time — and the results marshalled back)."""

    def __init__(self, events: list[LogEvent], workers: int) -> None:
        self.events = events
        self.futures: list[Future[list[Checked]]] = []
        self.pool: ThreadPoolExecutor | None = None
        if workers < 2 or not events:
            return
        try:
            self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="verify")
            for start in range(0, len(events), CHUNK):
                self.futures.append(self.pool.submit(_check_range, events, start, start + CHUNK))
        except RuntimeError:  # no threads here: check inline
            self.__exit__()
            self.futures = []

    def __iter__(self) -> Iterator[Checked]:
        if not self.futures:
            yield from map(check_event, self.events)
            return
        for future in self.futures:
            yield from future.result()

    def __enter__(self) -> _EventChecks:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None


async def verify_database(
    runtime: Any,
    checkpoint: SignedCheckpoint | None = None,
    *,
    on_start: Callable[[int], None] | None = None,
    on_process: Callable[[], None] | None = None,
) -> VerificationReport:
    """`verify` of every process, plus the deployment log: indexes gap-free, every event
    logged, stored leaves and head equal to the recomputed tree, every kept checkpoint
    (signed by a trusted node key) and the given one contained in the log."""
    from stateward.runtime.insight.verify import verify

    report = await verify(runtime, on_start=on_start, on_process=on_process)
    trusted = frozenset(report.trust.ever) if report.trust else frozenset()
    async with runtime.uow(readonly=True) as uow:
        kept = await uow.log.checkpoints()
        tree = TreeWalk(report, [c.size for c in kept] + ([checkpoint.size] if checkpoint else []))
        after = -1
        stored: dict[int, str] = {}
        while True:
            rows = await uow.log.events(after=after, limit=2000)
            if not rows:
                break
            ids = {i for i, _e in rows}
            stored = {
                i: h.hex() for (lv, i), h in (await uow.log.nodes((0, i) for i in ids)).items()
            }
            for index, event in rows:
                leaf = event_leaf_hash(event.process_id, event.seq, event.signer, event.hash)
                if stored.get(index) != leaf:
                    tree.problem(
                        index,
                        LEAF_MISMATCH,
                        f"stored leaf of {event.process_id}/{event.seq} differs from its event",
                    )
                tree.add(index, bytes.fromhex(leaf))
            after = rows[-1][0]
        unlogged = await uow.log.unlogged_events()
        size, root = await uow.log.head()
    if unlogged:
        tree.problem(tree.size, UNLOGGED_EVENT, f"{unlogged} event row(s) are not in the log")
    if (size, root) != (tree.size, tree.root):
        tree.problem(
            size,
            CHECKPOINT_MISMATCH,
            f"the stored log head ({size}, {root[:16]}…) differs from the recomputed "
            f"({tree.size}, {tree.root[:16]}…)",
        )
    for record in kept:
        _check_kept(tree, parse_checkpoint(record.as_json()), runtime.net, trusted)
    if checkpoint is not None:
        _check_kept(tree, checkpoint, runtime.net, trusted, "the given checkpoint")
    return report


def _check_kept(
    tree: TreeWalk, cp: SignedCheckpoint, net: str, trusted: frozenset[str], what: str = ""
) -> None:
    what = what or f"kept checkpoint of size {cp.size} by {cp.signer[:8]}…"
    try:
        verify_checkpoint(cp, net=net, trusted=trusted)
    except DomainError as exc:
        tree.problem(cp.size, BAD_CHECKPOINT, f"{what}: {exc.message}")
        return
    tree.check(cp, what)
