"""`verify`: re-check every signature and hash chain, and replay every log (DESIGN §6).

Per process: the stored envelope text must be canonical and agree with the event's
columns; each signature must verify (signer = actor or a trusted server key, key not
revoked when the event was recorded); `seq`/`prev_hash`/`hash` must chain; replaying the
events through the engine must reproduce the stored data, state and status (the stored
instance metadata must be the `$start` event's) (and, for a
registry, its materialized rows: role grants, workflow versions and hashes, modules).
Every finding names its process and seq; nothing stops at the first one.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stateward.domain.bootstrap import bootstrap_definition
from stateward.domain.canonical import canonical_bytes, loads_strict
from stateward.domain.errors import DomainError
from stateward.domain.migration import MIGRATE, migrate
from stateward.domain.model import Actor, Definition, Outcome, ProcessSnapshot
from stateward.domain.paths import SYSTEM_NAMESPACE, registry_id
from stateward.domain.versionhash import (
    LEGACY_SCHEME,
    ORDERED_SCHEME,
    definition_order,
    version_hash,
)
from stateward.governance.chain import GENESIS_PREV, ChainLink, verify_chain
from stateward.governance.envelope import Envelope, SignedEnvelope, parse_ts
from stateward.governance.keys import is_public_key
from stateward.governance.node_trust import (
    SYSTEM_REGISTRY,
    NodeTrust,
    admin_of,
    is_genesis,
    node_change,
)
from stateward.governance.verification import verify_envelope
from stateward.persistence import UnitOfWork
from stateward.records import (
    REGISTRY,
    KeyStatusRecord,
    ProcessRecord,
    StoredEvent,
    WorkflowVersionRecord,
)
from stateward.runtime.core.kernel import evaluate, replay_name
from stateward.runtime.core.services import Runtime, legacy_nodes

ENVELOPE_MISMATCH = "ENVELOPE_MISMATCH"
BAD_SIGNATURE = "BAD_SIGNATURE"
REPLAY_FAILED = "REPLAY_FAILED"
STATE_MISMATCH = "STATE_MISMATCH"
STATUS_MISMATCH = "STATUS_MISMATCH"
DATA_MISMATCH = "DATA_MISMATCH"
METADATA_MISMATCH = "METADATA_MISMATCH"
HEAD_MISMATCH = "HEAD_MISMATCH"
GRANTS_MISMATCH = "GRANTS_MISMATCH"
WORKFLOW_MISMATCH = "WORKFLOW_MISMATCH"
MODULE_MISMATCH = "MODULE_MISMATCH"
NOT_FOUND = "NOT_FOUND"
NODE_TRUST_FORBIDDEN = "NODE_TRUST_FORBIDDEN"


@dataclass(frozen=True)
class VerificationProblem:
    """One finding: which process, which event (seq; 0 = the process as a whole), what."""

    process: str
    seq: int
    code: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        """`{process, seq, code, message}`."""
        return {
            "process": self.process,
            "seq": self.seq,
            "code": self.code,
            "message": self.message,
        }

    def line(self) -> str:
        """`process seq CODE message` (the CLI's output format)."""
        return f"{self.process} {self.seq} {self.code} {self.message}"


@dataclass
class VerificationReport:
    """The result of `verify`: valid when no problem was found."""

    events_checked: int = 0
    processes_checked: int = 0
    problems: list[VerificationProblem] = field(default_factory=list)
    #: Node trust as the system registry's events left it (checkpoint signers).
    trust: NodeTrust | None = None

    @property
    def valid(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


async def verify(
    runtime: Runtime,
    process_id: str | None = None,
    *,
    on_start: Callable[[int], None] | None = None,
    on_process: Callable[[], None] | None = None,
) -> VerificationReport:
    """Verify one process, or every process (registries first, oldest first).

    `on_start(count)` and `on_process()` report progress (the CLI's progress bar)."""
    report = VerificationReport()
    async with runtime.uow(readonly=True) as uow:
        timeline = await trust_timeline(uow)
        report.trust = timeline.final()
        ids = [process_id] if process_id is not None else await uow.processes.all_ids()
        if SYSTEM_REGISTRY in ids:  # its trust events are reported once, with it
            ids.remove(SYSTEM_REGISTRY)
            ids.insert(0, SYSTEM_REGISTRY)
            for seq, message in timeline.forbidden:
                report.problems.append(
                    VerificationProblem(SYSTEM_REGISTRY, seq, NODE_TRUST_FORBIDDEN, message)
                )
        if on_start is not None:
            on_start(len(ids))
        for pid in ids:
            record = await uow.processes.get(pid)
            if record is None:
                report.problems.append(VerificationProblem(pid, 0, NOT_FOUND, "no such process"))
                continue
            checker = _ProcessCheck(runtime, uow, record, timeline, report)
            await checker.run()
            report.processes_checked += 1
            if on_process is not None:
                on_process()
    return report


class _ProcessCheck:
    """Verification of one process's log (see the module docstring)."""

    def __init__(
        self,
        runtime: Runtime,
        uow: UnitOfWork,
        record: ProcessRecord,
        trust: TrustTimeline,
        report: VerificationReport,
    ) -> None:
        self.runtime, self.uow, self.record = runtime, uow, record
        self.trust, self.report = trust, report

    def problem(self, seq: int, code: str, message: str) -> None:
        self.report.problems.append(VerificationProblem(self.record.id, seq, code, message))

    async def run(self) -> None:
        events = await self.uow.events.for_process(self.record.id)
        self.report.events_checked += len(events)
        for p in verify_chain(
            ChainLink(
                e.process_id,
                e.seq,
                e.prev_hash or GENESIS_PREV,
                e.hash,
                e.envelope.encode("utf-8"),
                e.signature,
            )
            for e in events
        ):
            self.problem(p.seq, p.code, p.message)
        keys = {k for e in events for k in (e.actor, e.signer) if is_public_key(k)}
        statuses = await self.uow.keys.statuses(keys)
        envelopes = [self._envelope(e, statuses) for e in events]
        versions = _versions(self.record, envelopes)
        definitions: dict[int, Definition] = {}
        for version in versions:
            found = await self._definition(version)
            if found is None:
                return
            definitions[version] = found
        replayed = self._replay(definitions, versions[0], events, envelopes)
        if replayed is not None:
            self._compare(replayed, events)
        if self.record.kind == REGISTRY:
            await self._registry_rows()

    def _envelope(
        self, event: StoredEvent, statuses: dict[str, KeyStatusRecord]
    ) -> Envelope | None:
        """Parse and check one stored envelope; None (with problems) when unusable."""
        try:
            envelope = Envelope.from_json(loads_strict(event.envelope))
        except DomainError as exc:
            self.problem(event.seq, ENVELOPE_MISMATCH, f"stored envelope is unreadable: {exc}")
            return None
        if envelope.canonical() != event.envelope.encode("utf-8"):
            self.problem(event.seq, ENVELOPE_MISMATCH, "stored envelope is not canonical JSON")
        columns = {
            "process_id": (event.process_id, envelope.process),
            "workflow": (event.workflow, envelope.action.workflow),
            "actor": (event.actor, envelope.actor),
            "nonce": (event.nonce, envelope.nonce),
            "ts": (event.ts, parse_ts(envelope.ts)),
            "identity": (event.identity, envelope.identity()),
            "input": (_canon(event.input), _canon(envelope.action.input)),
        }
        if envelope.action.name != "$advance" and event.action != envelope.action.name:
            columns["action"] = (event.action, envelope.action.name)
        for column, (stored, signed) in columns.items():
            if stored != signed:
                self.problem(
                    event.seq,
                    ENVELOPE_MISMATCH,
                    f"column {column} differs from the signed envelope",
                )
        signed_env = SignedEnvelope(envelope, event.signer, event.signature)
        try:
            verify_envelope(
                signed_env,
                net=self.runtime.net,
                now=None,
                trusted_signers=self.trust.at(event),
                revoked=_revoked_after(statuses, event),
            )
        except DomainError as exc:
            self.problem(event.seq, BAD_SIGNATURE, exc.message)
        return envelope

    async def _definition(self, pinned: int) -> Definition | None:
        record = self.record
        try:
            if record.kind == REGISTRY:
                return bootstrap_definition(record.namespace)
            version = await self.uow.workflows.version(record.workflow, pinned)
            if version is None:
                raise DomainError(NOT_FOUND, f"{record.workflow} v{pinned}")
            if version_problem(version) is not None:
                self.problem(
                    0,
                    WORKFLOW_MISMATCH,
                    f"{record.workflow} v{version.version}: definition differs from its hash",
                )
            return self.runtime.definitions.from_record(version)
        except DomainError as exc:
            self.problem(0, NOT_FOUND, f"pinned definition unavailable: {exc.message}")
            return None

    def _replay(
        self,
        definitions: dict[int, Definition],
        first: int,
        events: list[StoredEvent],
        envelopes: list[Envelope | None],
    ) -> ProcessSnapshot | None:
        """Replay the log through the engine; the snapshot after the last event. A
        `$migrate` event switches to the version it moved the instance to."""
        record, snapshot, definition = self.record, None, definitions[first]
        for event, envelope in zip(events, envelopes, strict=True):
            if envelope is None:
                return None
            actor = Actor(id=envelope.actor, visitor=envelope.actor.startswith("visitor:"))
            name = replay_name(envelope.action.name, event.action)
            try:
                if name == MIGRATE and snapshot is not None and record.kind != REGISTRY:
                    target = definitions[envelope.action.input["toVersion"]]
                    outcome = migrate(definition, target, snapshot, envelope.action.input,
                                      envelope.ts)  # fmt: skip
                    definition = target
                    snapshot = _after(record, snapshot, outcome, envelope)
                    continue
                outcome = evaluate(
                    definition,
                    snapshot,
                    name=name,
                    input=envelope.action.input,
                    actor=actor,
                    ts=envelope.ts,
                    event_id=envelope.identity(),
                    process_id=envelope.process,
                    authorize=False,
                )
            except DomainError as exc:
                self.problem(event.seq, REPLAY_FAILED, f"{exc.code}: {exc.message}")
                return None
            snapshot = _after(record, snapshot, outcome, envelope)
        return snapshot

    def _compare(self, replayed: ProcessSnapshot, events: list[StoredEvent]) -> None:
        record = self.record
        last = events[-1] if events else None
        seq = last.seq if last else 0
        if replayed.state != record.state:
            self.problem(
                seq,
                STATE_MISMATCH,
                f"stored state {record.state!r}, replay gives {replayed.state!r}",
            )
        if replayed.status != record.status:
            self.problem(
                seq,
                STATUS_MISMATCH,
                f"stored status {record.status!r}, replay gives {replayed.status!r}",
            )
        if _canon(replayed.data) != _canon(record.data):
            self.problem(seq, DATA_MISMATCH, "stored data differs from the replayed data")
        first = events[0] if events else None
        if first is not None and first.seq == 1 and record.kind != REGISTRY:
            started = first.input.get("metadata") if isinstance(first.input, dict) else None
            if _canon(started or None) != _canon(record.instance_metadata or None):
                self.problem(
                    1, METADATA_MISMATCH, "stored metadata differs from the $start event's"
                )
        if last is not None and (record.seq != last.seq or record.head_hash != last.hash):
            self.problem(seq, HEAD_MISMATCH, "process seq/head hash differ from its last event")

    async def _deploying(self, version: WorkflowVersionRecord) -> Any:
        """The input of the event that deployed `version` (False when it is not one)."""
        if version.event_id is None:
            return False
        event = (await self.uow.events.by_ids([version.event_id])).get(version.event_id)
        if event is None or event.action not in ("add_workflow", "update_workflow"):
            return False
        try:
            envelope = Envelope.from_json(loads_strict(event.envelope))
        except DomainError:
            return False
        input = envelope.action.input
        definition = input.get("definition") if isinstance(input, dict) else None
        if not isinstance(definition, dict) or definition.get("$path") != version.path:
            return False
        return input

    async def _registry_rows(self) -> None:
        """Materialized rows of a registry against its (verified) data."""
        ns, data, uow = self.record.namespace, self.record.data, self.uow
        system = await uow.processes.get(registry_id(SYSTEM_NAMESPACE))
        moved = _rotation_map(system.data if system else {})
        expected = {
            (moved(member), role)
            for member, roles in (data.get("members") or {}).items()
            for role in roles
        }
        actual = {(g.actor, g.role) for g in await uow.grants.members(ns)}
        if expected != actual:
            self.problem(
                0,
                GRANTS_MISMATCH,
                f"role_grants of {ns} differ from the registry's members "
                f"(missing {sorted(expected - actual)}, extra {sorted(actual - expected)})",
            )
        for path, info in (data.get("workflows") or {}).items():
            row = await uow.workflows.get(path)
            version = await uow.workflows.version(path, int(info["version"]))
            if (
                row is None
                or version is None
                or row.latest_version != info["version"]
                or version.hash != info["hash"]
                or bool(row.removed) != bool(info.get("removed"))
            ):
                self.problem(0, WORKFLOW_MISMATCH, f"workflow {path} differs from the registry")
        for path in data.get("workflows") or {}:
            for version in await uow.workflows.versions(path):
                found = version_problem(version, await self._deploying(version))
                if found is not None:
                    self.problem(0, WORKFLOW_MISMATCH, f"{path} v{version.version}: {found}")
        for name, info in (data.get("modules") or {}).items():
            module = await uow.modules.get(ns, name)
            if module is None or module.version != info["version"] or module.hash != info["hash"]:
                self.problem(0, MODULE_MISMATCH, f"module {ns}/{name} differs from the registry")


@dataclass
class TrustTimeline:
    """The node keys trusted before each event (by event id, like key revocation): the
    legacy keys, then the admin-signed `trust_node` / `distrust_node` events of the
    system registry in order. `forbidden`: (seq, message) of node events by non-admins
    (ignored)."""

    legacy: frozenset[str] = frozenset()
    changes: list[tuple[int, str, bool]] = field(default_factory=list)
    forbidden: list[tuple[int, str]] = field(default_factory=list)
    _sets: dict[int, frozenset[str]] = field(default_factory=dict)

    def _upto(self, count: int) -> NodeTrust:
        trust = NodeTrust(legacy=self.legacy)
        for _id, key, trusted in self.changes[:count]:
            trust.apply(key, trusted)
        return trust

    def at(self, event: StoredEvent) -> frozenset[str]:
        """The trusted signers for `event` (the genesis vouches for its own signer)."""
        ids = [c[0] for c in self.changes]
        count = bisect_left(ids, event.id) if event.id is not None else len(ids)
        if count not in self._sets:
            self._sets[count] = self._upto(count).current()
        current = self._sets[count]
        return current | {event.signer} if is_genesis(event.process_id, event.seq) else current

    def final(self) -> NodeTrust:
        """The trust after every event."""
        return self._upto(len(self.changes))


async def trust_timeline(uow: UnitOfWork) -> TrustTimeline:
    """Replay the system registry to find its admin-signed node trust events."""
    timeline = TrustTimeline(legacy=await legacy_nodes(uow))
    record = await uow.processes.get(SYSTEM_REGISTRY)
    if record is None:
        return timeline
    definition, snapshot = bootstrap_definition(SYSTEM_NAMESPACE), None
    for event in await uow.events.for_process(SYSTEM_REGISTRY):
        try:
            envelope = Envelope.from_json(loads_strict(event.envelope))
            name = replay_name(envelope.action.name, event.action)
            change = node_change(SYSTEM_REGISTRY, name, envelope.action.input)
            if change is not None:
                if admin_of(snapshot.data if snapshot else None, envelope.actor):
                    timeline.changes.append((event.id or 0, *change))
                else:
                    timeline.forbidden.append(
                        (event.seq, f"{name} by {envelope.actor}, who is not a system admin")
                    )
            outcome = evaluate(
                definition, snapshot, name=name, input=envelope.action.input,
                actor=Actor(id=envelope.actor), ts=envelope.ts,
                event_id=envelope.identity(), process_id=envelope.process, authorize=False,
            )  # fmt: skip
        except DomainError:
            break  # the process check reports it
        snapshot = _after(record, snapshot, outcome, envelope)
    timeline.changes.sort(key=lambda c: c[0])
    return timeline


def version_problem(version: WorkflowVersionRecord, deploying: Any = None) -> str | None:
    """What is wrong with a stored version, or None: its text must hash to its `hash`
    under its scheme; given the `input` of the event that deployed it (or False when
    that event is missing or is not a deployment of this path), the text must be that
    definition, in the signed `order` (scheme 2; a scheme-1 version's event has none)."""
    try:
        source = json.loads(version.definition)
    except ValueError:
        return "the stored text is not JSON"
    if not isinstance(source, dict) or version_hash(source, version.hash_scheme) != version.hash:
        return "the stored text differs from its hash"
    if deploying is None:
        return None
    if deploying is False:
        return "no add_workflow/update_workflow event of this path deployed it"
    definition, order = deploying.get("definition"), deploying.get("order")
    if not isinstance(definition, dict) or _canon(definition) != _canon(source):
        return "the stored text differs from the definition its event signed"
    expected = LEGACY_SCHEME if order is None else ORDERED_SCHEME
    if version.hash_scheme != expected:
        return f"hash scheme {version.hash_scheme}, but its event calls for {expected}"
    if order is not None and order != definition_order(source):
        return "the stored state/action order differs from the order its event signed"
    return None


def _versions(record: ProcessRecord, envelopes: list[Envelope | None]) -> list[int]:
    """The versions a process ran, in order: the one it started on, then the target of
    each `$migrate` (a process never migrated: just its pinned version)."""
    if record.kind == REGISTRY:
        return [record.workflow_version]
    versions: list[int] = []
    for envelope in envelopes:
        if envelope is None or envelope.action.name != MIGRATE:
            continue
        input = envelope.action.input
        for key in ("fromVersion", "toVersion") if not versions else ("toVersion",):
            value = input.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                versions.append(value)
    return list(dict.fromkeys(versions)) or [record.workflow_version]


def _after(
    record: ProcessRecord, before: ProcessSnapshot | None, outcome: Outcome, envelope: Envelope
) -> ProcessSnapshot:
    chain = (before.automation_chain + 1 if before else 1) if outcome.action == "$automate" else 0
    return ProcessSnapshot(
        id=record.id,
        workflow=record.workflow,
        version=record.workflow_version,
        state=outcome.state,
        status=outcome.status,
        data=outcome.data,
        started_by=before.started_by if before else envelope.actor,
        automation_chain=chain,
    )


def _revoked_after(
    statuses: dict[str, KeyStatusRecord], event: StoredEvent
) -> Callable[[str, str], bool]:
    """revoked(key, ts): the key was revoked/rotated by an event recorded before this one."""

    def revoked(key: str, _ts: str) -> bool:
        status = statuses.get(key)
        if status is None or status.event_id is None or event.id is None:
            return False
        return event.id > status.event_id

    return revoked


def _rotation_map(system_data: dict[str, Any]) -> Callable[[str], str]:
    rotated = (system_data.get("keys") or {}).get("rotated") or {}

    def follow(key: str) -> str:
        seen = set()
        while key in rotated and key not in seen:
            seen.add(key)
            key = rotated[key]
        return key

    return follow


def _canon(value: Any) -> str:
    try:
        return canonical_bytes(value).decode("utf-8")
    except DomainError:
        return json.dumps(value, sort_keys=True, default=str)
