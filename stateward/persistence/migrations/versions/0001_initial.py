"""Initial schema: every table of DESIGN §8 on SQLite and PostgreSQL.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Frozen copy of `persistence/models.py` + `models_ops.py` at the time of writing (generated
with alembic autogenerate, then reviewed); a test compares it with the models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create every table and index."""
    op.create_table(
        "api_tokens",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("label", sa.String(length=255), nullable=True),
        sa.Column("expires_at", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("revoked_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_index(op.f("ix_api_tokens_actor"), "api_tokens", ["actor"], unique=False)
    op.create_table(
        "auth_challenges",
        sa.Column("challenge", sa.String(length=255), nullable=False),
        sa.Column("public_key", sa.String(length=255), nullable=False),
        sa.Column("expires_at", TS, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("used_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("challenge", name=op.f("pk_auth_challenges")),
    )
    op.create_index(
        op.f("ix_auth_challenges_expires_at"), "auth_challenges", ["expires_at"], unique=False
    )
    op.create_table(
        "meta",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_meta")),
    )
    op.create_table(
        "outbox",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=True),
        sa.Column("workflow", sa.String(length=255), nullable=True),
        sa.Column("instance_id", sa.String(length=255), nullable=True),
        sa.Column("team", sa.String(length=255), nullable=True),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("published_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_outbox_unpublished",
        "outbox",
        ["id"],
        unique=False,
        sqlite_where=sa.text("published_at IS NULL"),
        postgresql_where=sa.text("published_at IS NULL"),
    )
    op.create_table(
        "processes",
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("workflow", sa.String(length=255), nullable=False),
        sa.Column("workflow_version", sa.Integer(), nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("state", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("head_hash", sa.String(length=64), nullable=True),
        sa.Column("parent_id", sa.String(length=255), nullable=True),
        sa.Column("started_by", sa.String(length=255), nullable=True),
        sa.Column("entry_token_hash", sa.String(length=64), nullable=True),
        sa.Column("state_entered_at", TS, nullable=False),
        sa.Column("sla_warn_at", TS, nullable=True),
        sa.Column("sla_due_at", TS, nullable=True),
        sa.Column("sla_warned_at", TS, nullable=True),
        sa.Column("sla_breached_at", TS, nullable=True),
        sa.Column("automation_chain", sa.Integer(), nullable=False),
        sa.Column("last_event_at", TS, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["parent_id"], ["processes.id"], name=op.f("fk_processes_parent_id_processes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_processes")),
        sa.UniqueConstraint("entry_token_hash", name=op.f("uq_processes_entry_token_hash")),
    )
    op.create_index(
        "ix_processes_namespace_status", "processes", ["namespace", "status"], unique=False
    )
    op.create_index("ix_processes_parent_id", "processes", ["parent_id"], unique=False)
    op.create_index(
        "ix_processes_sla_due_pending",
        "processes",
        ["sla_due_at"],
        unique=False,
        sqlite_where=sa.text("sla_breached_at IS NULL AND status IN ('active', 'stale')"),
        postgresql_where=sa.text("sla_breached_at IS NULL AND status IN ('active', 'stale')"),
    )
    op.create_index(
        "ix_processes_sla_warn_pending",
        "processes",
        ["sla_warn_at"],
        unique=False,
        sqlite_where=sa.text("sla_warned_at IS NULL AND status IN ('active', 'stale')"),
        postgresql_where=sa.text("sla_warned_at IS NULL AND status IN ('active', 'stale')"),
    )
    op.create_index(
        "ix_processes_status_last_event_at", "processes", ["status", "last_event_at"], unique=False
    )
    op.create_index(
        "ix_processes_workflow_status", "processes", ["workflow", "status"], unique=False
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", TS, nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("delivered_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
    )
    op.create_index(
        "ix_webhook_deliveries_status_next_attempt_at",
        "webhook_deliveries",
        ["status", "next_attempt_at"],
        unique=False,
    )
    op.create_table(
        "workflows",
        sa.Column("path", sa.String(length=255), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("latest_version", sa.Integer(), nullable=False),
        sa.Column("removed", sa.Boolean(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("path", name=op.f("pk_workflows")),
    )
    op.create_index(op.f("ix_workflows_namespace"), "workflows", ["namespace"], unique=False)
    op.create_table(
        "assignments",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("process_id", sa.String(length=255), nullable=False),
        sa.Column("state", sa.String(length=255), nullable=False),
        sa.Column("team", sa.String(length=255), nullable=False),
        sa.Column("assignee", sa.String(length=255), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("review_data", JSON, nullable=True),
        sa.Column("entered_seq", sa.Integer(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("claimed_at", TS, nullable=True),
        sa.Column("completed_at", TS, nullable=True),
        sa.Column("cancelled_at", TS, nullable=True),
        sa.ForeignKeyConstraint(
            ["process_id"], ["processes.id"], name=op.f("fk_assignments_process_id_processes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignments")),
    )
    op.create_index(
        "ix_assignments_assignee_status", "assignments", ["assignee", "status"], unique=False
    )
    op.create_index(
        "ix_assignments_process_id_status", "assignments", ["process_id", "status"], unique=False
    )
    op.create_index("ix_assignments_team_status", "assignments", ["team", "status"], unique=False)
    op.create_table(
        "events",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("process_id", sa.String(length=255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("identity", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=255), nullable=False),
        sa.Column("workflow", sa.String(length=255), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("signer", sa.String(length=255), nullable=False),
        sa.Column("ts", TS, nullable=False),
        sa.Column("nonce", sa.String(length=255), nullable=False),
        sa.Column("input", JSON, nullable=False),
        sa.Column("envelope", sa.Text(), nullable=False),
        sa.Column("signature", sa.String(length=255), nullable=False),
        sa.Column("prev_hash", sa.String(length=64), nullable=True),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("recorded_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["process_id"], ["processes.id"], name=op.f("fk_events_process_id_processes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("actor", "nonce", name=op.f("uq_events_actor_nonce")),
        sa.UniqueConstraint("identity", name=op.f("uq_events_identity")),
        sa.UniqueConstraint("process_id", "seq", name=op.f("uq_events_process_id_seq")),
    )
    op.create_index("ix_events_hash", "events", ["hash"], unique=False)
    op.create_table(
        "notifications",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("recipient", sa.String(length=255), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("process_id", sa.String(length=255), nullable=True),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("read_at", TS, nullable=True),
        sa.ForeignKeyConstraint(
            ["process_id"], ["processes.id"], name=op.f("fk_notifications_process_id_processes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notifications")),
    )
    op.create_index(
        "ix_notifications_recipient_id", "notifications", ["recipient", "id"], unique=False
    )
    op.create_table(
        "schedules",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("process_id", sa.String(length=255), nullable=False),
        sa.Column("action", sa.String(length=255), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=True),
        sa.Column("due_at", TS, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("created_seq", sa.Integer(), nullable=True),
        sa.Column("fired_at", TS, nullable=True),
        sa.Column("claimed_by", sa.String(length=255), nullable=True),
        sa.Column("claimed_at", TS, nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["process_id"], ["processes.id"], name=op.f("fk_schedules_process_id_processes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
    )
    op.create_index(
        "ix_schedules_process_id_status", "schedules", ["process_id", "status"], unique=False
    )
    op.create_index("ix_schedules_status_due_at", "schedules", ["status", "due_at"], unique=False)
    op.create_table(
        "key_status",
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("rotated_to", sa.String(length=255), nullable=True),
        sa.Column("rotated_at", TS, nullable=True),
        sa.Column("revoked_at", TS, nullable=True),
        sa.Column("event_id", BIG_ID, nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_key_status_event_id_events")
        ),
        sa.PrimaryKeyConstraint("actor", name=op.f("pk_key_status")),
    )
    op.create_table(
        "modules",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("event_id", BIG_ID, nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_modules_event_id_events")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_modules")),
        sa.UniqueConstraint(
            "namespace", "name", "version", name=op.f("uq_modules_namespace_name_version")
        ),
    )
    op.create_table(
        "role_grants",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("role", sa.String(length=255), nullable=False),
        sa.Column("granted_at", TS, nullable=False),
        sa.Column("event_id", BIG_ID, nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_role_grants_event_id_events")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_role_grants")),
        sa.UniqueConstraint(
            "namespace", "actor", "role", name=op.f("uq_role_grants_namespace_actor_role")
        ),
    )
    op.create_index(op.f("ix_role_grants_actor"), "role_grants", ["actor"], unique=False)
    op.create_table(
        "webhooks",
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", sa.String(length=255), nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("event_id", BIG_ID, nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_webhooks_event_id_events")
        ),
        sa.PrimaryKeyConstraint("namespace", name=op.f("pk_webhooks")),
    )
    op.create_table(
        "workflow_versions",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("path", sa.String(length=255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("event_id", BIG_ID, nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_workflow_versions_event_id_events")
        ),
        sa.ForeignKeyConstraint(
            ["path"], ["workflows.path"], name=op.f("fk_workflow_versions_path_workflows")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_versions")),
        sa.UniqueConstraint("path", "version", name=op.f("uq_workflow_versions_path_version")),
    )


def downgrade() -> None:
    """Drop every table (indexes go with them)."""
    op.drop_table("workflow_versions")
    op.drop_table("webhooks")
    op.drop_table("role_grants")
    op.drop_table("modules")
    op.drop_table("key_status")
    op.drop_table("schedules")
    op.drop_table("notifications")
    op.drop_table("events")
    op.drop_table("assignments")
    op.drop_table("workflows")
    op.drop_table("webhook_deliveries")
    op.drop_table("processes")
    op.drop_table("outbox")
    op.drop_table("meta")
    op.drop_table("auth_challenges")
    op.drop_table("api_tokens")
