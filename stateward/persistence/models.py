"""ORM models of the core tables: processes, events, workflow registry data, access control.

Operational tables (assignments, schedules, notifications, webhooks, outbox, meta) live in
`models_ops.py`. Both share `Base.metadata`, which the migrations mirror (a test compares
them). Mapped classes never leave `stateward.persistence`: repositories map them to records.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from stateward.persistence.types import JSONType, UTCDateTime

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: An autoincrementing 64-bit id (SQLite only autoincrements INTEGER PRIMARY KEY).
BigId = BigInteger().with_variant(Integer(), "sqlite")

#: SQL for "the process is live and has not fired this SLA mark yet" (partial indexes).
LIVE = "status IN ('active', 'stale')"


class Base(DeclarativeBase):
    """Declarative base with a naming convention so constraint names are stable."""

    metadata = MetaData(naming_convention=NAMING)


class Process(Base):
    """A registry or a workflow instance: its current data, state, status and deadlines."""

    __tablename__ = "processes"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # 'registry' | 'instance'
    namespace: Mapped[str] = mapped_column(String(255))
    workflow: Mapped[str] = mapped_column(String(255))
    workflow_version: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16))
    seq: Mapped[int] = mapped_column(Integer, default=0)
    head_hash: Mapped[str | None] = mapped_column(String(64))
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("processes.id"))
    started_by: Mapped[str | None] = mapped_column(String(255))
    entry_token_hash: Mapped[str | None] = mapped_column(String(64), unique=True)
    state_entered_at: Mapped[datetime] = mapped_column(UTCDateTime())
    sla_warn_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    sla_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    sla_warned_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    sla_breached_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    automation_chain: Mapped[int] = mapped_column(Integer, default=0)
    #: When the automation of the current `system` state was last started (its entry, or
    #: a recovery sweep's claim); NULL when the current state awaits no hook.
    automation_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    #: The `metadata` object of `$start` (seed §3b): read by hooks, surfaces and the API,
    #: never by routing; NULL when none was given.
    instance_metadata: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    last_event_at: Mapped[datetime] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index(
            "ix_processes_sla_warn_pending",
            "sla_warn_at",
            sqlite_where=text(f"sla_warned_at IS NULL AND {LIVE}"),
            postgresql_where=text(f"sla_warned_at IS NULL AND {LIVE}"),
        ),
        Index(
            "ix_processes_sla_due_pending",
            "sla_due_at",
            sqlite_where=text(f"sla_breached_at IS NULL AND {LIVE}"),
            postgresql_where=text(f"sla_breached_at IS NULL AND {LIVE}"),
        ),
        Index(
            "ix_processes_automation_pending",
            "automation_at",
            sqlite_where=text(f"automation_at IS NOT NULL AND {LIVE}"),
            postgresql_where=text(f"automation_at IS NOT NULL AND {LIVE}"),
        ),
        Index("ix_processes_status_last_event_at", "status", "last_event_at"),
        Index("ix_processes_parent_id", "parent_id"),
        Index("ix_processes_workflow_status", "workflow", "status"),
        Index("ix_processes_namespace_status", "namespace", "status"),
        # Searches (issue 16): keyset order by time, data conditions by jsonb containment.
        Index("ix_processes_created_at_id", "created_at", "id"),
        Index("ix_processes_updated_at_id", "updated_at", "id"),
    )


class ProcessData(Base):
    """A process's data, in a row of its own: written only by an event that changes it.

    In the `processes` row it was written again, and on PostgreSQL re-indexed whole in
    the GIN index below, by every event: each event changes indexed columns of the row
    (`updated_at`, `last_event_at`), so no update of it is HOT and every index gets an
    entry for the new row version (docs/decisions.md, "Instance data in a table of its
    own"). Deleted with its process."""

    __tablename__ = "process_data"

    process_id: Mapped[str] = mapped_column(
        ForeignKey("processes.id", ondelete="CASCADE"), primary_key=True
    )
    data: Mapped[dict[str, Any]] = mapped_column(JSONType)

    __table_args__ = (
        # Searches (issue 16): data conditions by jsonb containment.
        Index(
            "ix_process_data_data",
            "data",
            postgresql_using="gin",
            postgresql_ops={"data": "jsonb_path_ops"},
        ).ddl_if(dialect="postgresql"),
    )


class Event(Base):
    """One signed, hash-chained event of a process's append-only log."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    process_id: Mapped[str] = mapped_column(ForeignKey("processes.id"))
    seq: Mapped[int] = mapped_column(Integer)
    identity: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(255))
    workflow: Mapped[str] = mapped_column(String(255))
    actor: Mapped[str] = mapped_column(String(255))
    signer: Mapped[str] = mapped_column(String(255))
    ts: Mapped[datetime] = mapped_column(UTCDateTime())
    nonce: Mapped[str] = mapped_column(String(255))
    input: Mapped[Any] = mapped_column(JSONType)
    envelope: Mapped[str] = mapped_column(Text)
    signature: Mapped[str] = mapped_column(String(255))
    prev_hash: Mapped[str | None] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        UniqueConstraint("process_id", "seq"),
        # (actor, nonce) also keeps an envelope from being stored twice: its identity
        # hashes its canonical bytes, which hold both (no index of its own: migration 0021)
        UniqueConstraint("actor", "nonce"),
        # The audit log (issue 16): by time, and by actor and time.
        Index("ix_events_recorded_at_id", "recorded_at", "id"),
        Index("ix_events_actor_recorded_at_id", "actor", "recorded_at", "id"),
    )


class Workflow(Base):
    """A deployed workflow path: its latest version number and whether it was removed."""

    __tablename__ = "workflows"

    path: Mapped[str] = mapped_column(String(255), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(255))
    latest_version: Mapped[int] = mapped_column(Integer)
    removed: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class WorkflowVersion(Base):
    """An immutable version of a workflow: its JSON text as authored and its canonical hash."""

    __tablename__ = "workflow_versions"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    path: Mapped[str] = mapped_column(ForeignKey("workflows.path"))
    version: Mapped[int] = mapped_column(Integer)
    hash: Mapped[str] = mapped_column(String(64))
    definition: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    event_id: Mapped[int | None] = mapped_column(ForeignKey("events.id"))
    #: 2: `hash` covers state/action order; 1: legacy (RFC 8785, sorted), migration 0005.
    hash_scheme: Mapped[int] = mapped_column(Integer, server_default="1")

    __table_args__ = (UniqueConstraint("path", "version"),)


class Module(Base):
    """An immutable version of a Starlark hook module deployed to a namespace registry."""

    __tablename__ = "modules"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(255))
    version: Mapped[int] = mapped_column(Integer)
    hash: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    event_id: Mapped[int | None] = mapped_column(ForeignKey("events.id"))

    __table_args__ = (UniqueConstraint("namespace", "name", "version"),)


class RoleGrant(Base):
    """A role an actor holds in a namespace (materialized from registry events)."""

    __tablename__ = "role_grants"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(255))
    actor: Mapped[str] = mapped_column(String(255), index=True)
    role: Mapped[str] = mapped_column(String(255))
    granted_at: Mapped[datetime] = mapped_column(UTCDateTime())
    event_id: Mapped[int | None] = mapped_column(ForeignKey("events.id"))

    __table_args__ = (UniqueConstraint("namespace", "actor", "role"),)


class KeyStatus(Base):
    """Rotation/revocation state of an actor key (absent row = an ordinary active key)."""

    __tablename__ = "key_status"

    actor: Mapped[str] = mapped_column(String(255), primary_key=True)
    status: Mapped[str] = mapped_column(String(16))  # 'active' | 'rotated' | 'revoked'
    rotated_to: Mapped[str | None] = mapped_column(String(255))
    rotated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    event_id: Mapped[int | None] = mapped_column(ForeignKey("events.id"))


class ApiToken(Base):
    """A bearer token (only its sha256 is stored) acting for an actor."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    actor: Mapped[str] = mapped_column(String(255), index=True)
    label: Mapped[str | None] = mapped_column(String(255))
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class AuthChallenge(Base):
    """A single-use login challenge issued to a public key."""

    __tablename__ = "auth_challenges"

    challenge: Mapped[str] = mapped_column(String(255), primary_key=True)
    public_key: Mapped[str] = mapped_column(String(255))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
