"""Read-model records: frozen dataclasses for rows the domain has no type for.

Repositories return these (or `stateward.domain.model` types), never mapped classes, so
callers cannot trigger lazy loads or accidental writes. They sit below persistence, the
runtime and the GraphQL layer, which reads them from here (never from persistence).
Timestamps are aware UTC datetimes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from stateward.domain.frozen import quick_init
from stateward.domain.model import ProcessSnapshot

REGISTRY = "registry"
INSTANCE = "instance"


@quick_init
@dataclass(frozen=True)
class ProcessRecord:
    """Every column of a `processes` row (a registry or an instance)."""

    id: str
    kind: str
    namespace: str
    workflow: str
    workflow_version: int
    data: dict[str, Any]
    state: str
    status: str
    seq: int
    state_entered_at: datetime
    last_event_at: datetime
    created_at: datetime
    updated_at: datetime
    head_hash: str | None = None
    parent_id: str | None = None
    started_by: str | None = None
    entry_token_hash: str | None = None
    sla_warn_at: datetime | None = None
    sla_due_at: datetime | None = None
    sla_warned_at: datetime | None = None
    sla_breached_at: datetime | None = None
    automation_chain: int = 0
    automation_at: datetime | None = None
    instance_metadata: dict[str, Any] | None = None

    def snapshot(self, claimed_by: str | None = None) -> ProcessSnapshot:
        """The engine's view of this process (`claimed_by`: assignee of the open claim)."""
        return ProcessSnapshot(
            id=self.id,
            workflow=self.workflow,
            version=self.workflow_version,
            state=self.state,
            status=self.status,
            data=self.data,
            started_by=self.started_by,
            claimed_by=claimed_by,
            automation_chain=self.automation_chain,
        )


@quick_init
@dataclass(frozen=True)
class StoredEvent:
    """One event of the log: the envelope's parts plus signer, signature, seq and hashes.

    `id` and `recorded_at` are filled in by `EventRepository.append`.
    """

    process_id: str
    seq: int
    identity: str
    action: str
    workflow: str
    actor: str
    signer: str
    ts: datetime
    nonce: str
    input: Any
    envelope: str
    signature: str
    hash: str
    prev_hash: str | None = None
    recorded_at: datetime | None = None
    id: int | None = None


@quick_init
@dataclass(frozen=True)
class WorkflowRecord:
    """A deployed workflow path and its latest version."""

    path: str
    namespace: str
    name: str
    latest_version: int
    removed: bool
    created_at: datetime
    updated_at: datetime


@quick_init
@dataclass(frozen=True)
class WorkflowVersionRecord:
    """An immutable version: the definition JSON text as authored (map order kept, which
    ordinals need) and `hash` under `hash_scheme` (`domain/versionhash.py`: 2 = the
    RFC 8785 form of the order-keeping view; 1 = legacy, the RFC 8785 form itself)."""

    path: str
    version: int
    hash: str
    definition: str
    created_at: datetime
    event_id: int | None = None
    hash_scheme: int = 2

    def source(self) -> dict[str, Any]:
        """The definition as a JSON object."""
        value: dict[str, Any] = json.loads(self.definition)
        return value


@quick_init
@dataclass(frozen=True)
class ModuleRecord:
    """An immutable version of a Starlark module of a namespace."""

    namespace: str
    name: str
    version: int
    hash: str
    source: str
    created_at: datetime
    event_id: int | None = None


@quick_init
@dataclass(frozen=True)
class GrantRecord:
    """A role an actor holds in a namespace."""

    namespace: str
    actor: str
    role: str
    granted_at: datetime
    event_id: int | None = None


@quick_init
@dataclass(frozen=True)
class KeyStatusRecord:
    """Rotation/revocation state of a key."""

    actor: str
    status: str
    rotated_to: str | None = None
    rotated_at: datetime | None = None
    revoked_at: datetime | None = None
    event_id: int | None = None


@quick_init
@dataclass(frozen=True)
class ApiTokenRecord:
    """A bearer token (sha256 only) for an actor."""

    token_hash: str
    actor: str
    label: str | None
    expires_at: datetime | None
    created_at: datetime
    revoked_at: datetime | None = None

    def valid_at(self, now: datetime) -> bool:
        """True when not revoked and not expired at `now`."""
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


@quick_init
@dataclass(frozen=True)
class AssignmentRecord:
    """A review-queue item."""

    id: str
    process_id: str
    state: str
    team: str
    status: str
    entered_seq: int
    created_at: datetime
    assignee: str | None = None
    review_data: Any = None
    claimed_at: datetime | None = None
    completed_at: datetime | None = None
    cancelled_at: datetime | None = None
    priority: int | None = None
    due_at: datetime | None = None
    follow_up_at: datetime | None = None
    candidate_users: Any = None  # a list of actor ids, or None


@quick_init
@dataclass(frozen=True)
class DelegatedTaskRecord:
    """A delegated stage of an instance, open while the instance stays in it (issue 13)."""

    id: str
    process_id: str
    namespace: str
    workflow: str
    state: str
    surface: str
    entered_seq: int
    status: str
    created_at: datetime
    token_hash: str | None = None
    token_expires_at: datetime | None = None
    locked_by: str | None = None
    locked_until: datetime | None = None
    closed_at: datetime | None = None


@quick_init
@dataclass(frozen=True)
class ScheduleRecord:
    """A timer on a process."""

    id: int
    process_id: str
    action: str
    key: str | None
    due_at: datetime
    status: str
    created_at: datetime
    created_seq: int | None = None
    fired_at: datetime | None = None
    claimed_by: str | None = None
    claimed_at: datetime | None = None
    detail: str | None = None


@quick_init
@dataclass(frozen=True)
class NotificationRecord:
    """A message for an actor or `team:<name>`."""

    id: int
    recipient: str
    namespace: str
    process_id: str | None
    kind: str
    payload: Any
    created_at: datetime
    read_at: datetime | None = None


@quick_init
@dataclass(frozen=True)
class WebhookRecord:
    """The webhook of a namespace."""

    namespace: str
    url: str
    secret: str | None
    updated_at: datetime
    event_id: int | None = None


@quick_init
@dataclass(frozen=True)
class DeliveryRecord:
    """A webhook delivery to attempt (or attempted)."""

    id: int
    namespace: str
    url: str
    event_type: str
    body: str
    status: str
    attempts: int
    next_attempt_at: datetime
    created_at: datetime
    last_error: str | None = None
    delivered_at: datetime | None = None
    #: The instance whose event queued it (None: queued before revision 0015).
    process_id: str | None = None


@quick_init
@dataclass(frozen=True)
class OutboxRecord:
    """A bus message; `id` is the subscription cursor (monotonic in commit order)."""

    id: int
    type: str
    payload: dict[str, Any]
    created_at: datetime
    namespace: str | None = None
    workflow: str | None = None
    instance_id: str | None = None
    team: str | None = None
    published_at: datetime | None = None

    def message(self) -> dict[str, Any]:
        """The bus message of DESIGN §9: the stored payload with `id` and `type` set."""
        return {**self.payload, "id": self.id, "type": self.type}


@quick_init
@dataclass(frozen=True)
class OutboxFilter:
    """Which outbox rows a subscriber wants (None/empty = any)."""

    types: tuple[str, ...] = ()
    namespace: str | None = None
    workflow: str | None = None
    instance_id: str | None = None
    team: str | None = None


@quick_init
@dataclass(frozen=True)
class SlaClaim:
    """An SLA mark (`warning` or `breach`) this caller won the right to fire."""

    kind: str
    deadline: datetime
    process: ProcessRecord


@quick_init
@dataclass(frozen=True)
class CheckpointRecord:
    """A signed tree head of the deployment log (`body` is the RFC 8785 text signed)."""

    id: int | None
    size: int
    root: str
    ts: datetime
    signer: str
    signature: str
    body: str

    def as_json(self) -> dict[str, Any]:
        """`{"checkpoint": body, "signer", "signature"}`: the portable, verifiable form."""
        return {
            "checkpoint": json.loads(self.body),
            "signer": self.signer,
            "signature": self.signature,
        }


@quick_init
@dataclass(frozen=True)
class MessageRecord:
    """A published message (issue 15)."""

    id: int
    namespace: str
    name: str
    correlation_key: str
    message_id: str
    payload: Any
    publisher: str
    published_at: datetime
    expires_at: datetime


@quick_init
@dataclass(frozen=True)
class MessageDeliveryRecord:
    """A message to perform on one instance (pending, delivered or not_applicable)."""

    id: int
    message_ref: int
    process_id: str
    action: str
    status: str
    created_at: datetime
    delivered_at: datetime | None = None
    claimed_by: str | None = None
    detail: str | None = None


@quick_init
@dataclass(frozen=True)
class BatchRecord:
    """A bulk operation (issue 15)."""

    id: str
    kind: str
    filter: Any
    params: Any
    status: str
    total: int
    succeeded: int
    failed: int
    created_by: str
    created_at: datetime
    finished_at: datetime | None = None


@quick_init
@dataclass(frozen=True)
class BatchItemRecord:
    """One instance of a bulk operation and its outcome."""

    batch_id: str
    position: int
    process_id: str
    status: str
    claimed_by: str | None = None
    claimed_at: datetime | None = None
    finished_at: datetime | None = None
    code: str | None = None
    message: str | None = None


@quick_init
@dataclass(frozen=True)
class IncidentRecord:
    """A failure that stopped an instance (issue 15), open while `resolved_at` is None."""

    id: str
    process_id: str
    namespace: str
    workflow: str
    kind: str
    state: str
    message: str
    attempts: int
    opened_seq: int
    created_at: datetime
    resolved_at: datetime | None = None
    resolved_seq: int | None = None
    resolution: str | None = None
    #: The webhook delivery of a WEBHOOK_EXHAUSTED incident (None for every other kind).
    delivery_id: int | None = None

    @property
    def resolved(self) -> bool:
        """True once the incident was resolved."""
        return self.resolved_at is not None
