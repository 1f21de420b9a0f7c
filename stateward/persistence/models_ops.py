"""ORM models of the operational tables: assignments, schedules, notifications,
webhooks and their deliveries, the outbox (subscription cursor) and deployment meta."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from stateward.persistence.models import Base, BigId
from stateward.persistence.types import JSONType, UTCDateTime


class Assignment(Base):
    """A review-queue item opened when an instance enters a state with `assign`."""

    __tablename__ = "assignments"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    process_id: Mapped[str] = mapped_column(ForeignKey("processes.id"))
    state: Mapped[str] = mapped_column(String(255))
    team: Mapped[str] = mapped_column(String(255))
    assignee: Mapped[str | None] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16))  # unassigned|claimed|completed|cancelled
    review_data: Mapped[Any] = mapped_column(JSONType, nullable=True)
    entered_seq: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    cancelled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    #: Task fields (issue 16): higher `priority` first when ordered by it; `due_at` the
    #: deadline, `follow_up_at` when to look at it again; NULL when the state sets none.
    priority: Mapped[int | None] = mapped_column(Integer)
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    follow_up_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    #: The candidate users as a JSON list (what is read); `assignment_candidates` indexes it.
    candidate_users: Mapped[Any] = mapped_column(JSONType, nullable=True)

    __table_args__ = (
        Index("ix_assignments_team_status", "team", "status"),
        Index("ix_assignments_assignee_status", "assignee", "status"),
        Index("ix_assignments_process_id_status", "process_id", "status"),
        Index("ix_assignments_created_at_id", "created_at", "id"),
        Index("ix_assignments_due_at_id", "due_at", "id"),
        Index("ix_assignments_priority_id", "priority", "id"),
    )


class AssignmentCandidate(Base):
    """One candidate user of an assignment: may claim it without the team's role, and
    sees it in `myAssignments` (issue 16). A row per user keeps the lookup indexed."""

    __tablename__ = "assignment_candidates"

    assignment_id: Mapped[str] = mapped_column(ForeignKey("assignments.id"), primary_key=True)
    candidate: Mapped[str] = mapped_column(String(255), primary_key=True)

    __table_args__ = (Index("ix_assignment_candidates_candidate", "candidate"),)


class StateVisit(Base):
    """One stay of an instance in a state (the analytics read model, written with the event
    that entered or left it). Instants are epoch milliseconds so SQL subtracts them on
    both databases. `ended`: '' while the instance is in it, 'left' (a state change),
    'completed', 'cancelled' or 'error' (the instance ended in it)."""

    __tablename__ = "state_visits"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    process_id: Mapped[str] = mapped_column(ForeignKey("processes.id"))
    workflow: Mapped[str] = mapped_column(String(255))
    version: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(255))
    entered_seq: Mapped[int] = mapped_column(Integer)
    entered_ms: Mapped[int] = mapped_column(BigInteger)
    left_ms: Mapped[int | None] = mapped_column(BigInteger)
    ended: Mapped[str] = mapped_column(String(16), default="")
    due_ms: Mapped[int | None] = mapped_column(BigInteger)
    breached: Mapped[bool] = mapped_column(Boolean, default=False)

    __table_args__ = (
        Index("ix_state_visits_process_id_ended", "process_id", "ended"),
        Index("ix_state_visits_workflow_entered_ms", "workflow", "entered_ms"),
        Index("ix_state_visits_workflow_left_ms", "workflow", "left_ms"),
    )


class DelegatedTask(Base):
    """A stay of an instance in a `delegated` state, handed to its surface (issue 13).

    Opened with the event that enters the state, closed with the one that leaves it (or
    ends the instance). `token_hash` is the sha256 of the one callback token that may
    complete it now (the webhook's, or the lock holder's), valid until `token_expires_at`;
    `locked_by` / `locked_until` are a worker's lease (`lockDelegatedTask`)."""

    __tablename__ = "delegated_tasks"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    process_id: Mapped[str] = mapped_column(ForeignKey("processes.id"))
    namespace: Mapped[str] = mapped_column(String(255))
    workflow: Mapped[str] = mapped_column(String(255))
    state: Mapped[str] = mapped_column(String(255))
    surface: Mapped[str] = mapped_column(String(255))
    entered_seq: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))  # open|completed|closed
    token_hash: Mapped[str | None] = mapped_column(String(64))
    token_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    locked_by: Mapped[str | None] = mapped_column(String(255))
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_delegated_tasks_status_surface_created_at", "status", "surface", "created_at"),
        Index("ix_delegated_tasks_process_id_status", "process_id", "status"),
        Index("ix_delegated_tasks_token_hash", "token_hash", unique=True),
    )


class Schedule(Base):
    """A timer: fire `action` on the process as `system` when `due_at` has passed."""

    __tablename__ = "schedules"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    process_id: Mapped[str] = mapped_column(ForeignKey("processes.id"))
    action: Mapped[str] = mapped_column(String(255))
    key: Mapped[str | None] = mapped_column(String(255))
    due_at: Mapped[datetime] = mapped_column(UTCDateTime())
    status: Mapped[str] = mapped_column(String(16))  # pending|fired|failed|cancelled|not_applicable
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    created_seq: Mapped[int | None] = mapped_column(Integer)
    fired_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    claimed_by: Mapped[str | None] = mapped_column(String(255))
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    detail: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("ix_schedules_status_due_at", "status", "due_at"),
        Index("ix_schedules_process_id_status", "process_id", "status"),
    )


class Notification(Base):
    """A message for an actor or a team (`team:<name>`), e.g. an SLA breach."""

    __tablename__ = "notifications"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    recipient: Mapped[str] = mapped_column(String(255))
    namespace: Mapped[str] = mapped_column(String(255))
    process_id: Mapped[str | None] = mapped_column(ForeignKey("processes.id"))
    kind: Mapped[str] = mapped_column(String(64))
    payload: Mapped[Any] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    read_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (Index("ix_notifications_recipient_id", "recipient", "id"),)


class Webhook(Base):
    """The webhook of a namespace (set by the registry's `set_webhook` event)."""

    __tablename__ = "webhooks"

    namespace: Mapped[str] = mapped_column(String(255), primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    secret: Mapped[str | None] = mapped_column(String(255))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    event_id: Mapped[int | None] = mapped_column(ForeignKey("events.id"))


class WebhookDelivery(Base):
    """One HMAC-signed webhook POST to make, with retries and backoff."""

    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(255))
    url: Mapped[str] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))  # pending|delivered|failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    #: The instance whose event queued it (its exhaustion is an incident of that instance).
    process_id: Mapped[str | None] = mapped_column(String(255))

    __table_args__ = (
        Index("ix_webhook_deliveries_status_next_attempt_at", "status", "next_attempt_at"),
    )


class Outbox(Base):
    """A bus message written in its event's transaction; `id` is the subscription cursor."""

    __tablename__ = "outbox"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    type: Mapped[str] = mapped_column(String(64))
    namespace: Mapped[str | None] = mapped_column(String(255))
    workflow: Mapped[str | None] = mapped_column(String(255))
    instance_id: Mapped[str | None] = mapped_column(String(255))
    team: Mapped[str | None] = mapped_column(String(255))
    payload: Mapped[Any] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    published_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index(
            "ix_outbox_unpublished",
            "id",
            sqlite_where=text("published_at IS NULL"),
            postgresql_where=text("published_at IS NULL"),
        ),
        {"sqlite_autoincrement": True},
    )


class Meta(Base):
    """Deployment facts as key/value text (e.g. `net`, the deployment id)."""

    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
