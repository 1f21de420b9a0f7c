"""Message correlation (issue 15): messages, the waits index, deliveries.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Instances that exist before this revision wait for nothing until their next event:
their workflows were deployed before `message`/`correlation` existed.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    """Create the three tables and their indexes."""
    op.create_table(
        "messages",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("correlation_key", sa.String(length=512), nullable=False),
        sa.Column("message_id", sa.String(length=255), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("publisher", sa.String(length=255), nullable=False),
        sa.Column("published_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
        sa.UniqueConstraint(
            "namespace", "name", "message_id", name=op.f("uq_messages_namespace_name_message_id")
        ),
    )
    op.create_index(
        "ix_messages_name_correlation_key_expires_at",
        "messages",
        ["name", "correlation_key", "expires_at"],
    )
    op.create_index("ix_messages_expires_at", "messages", ["expires_at"])
    op.create_table(
        "message_waits",
        sa.Column("process_id", sa.String(length=255), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("correlation_key", sa.String(length=512), nullable=False),
        sa.Column("action", sa.String(length=255), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(
            ["process_id"], ["processes.id"], name=op.f("fk_message_waits_process_id_processes")
        ),
        sa.PrimaryKeyConstraint("process_id", "name", name=op.f("pk_message_waits")),
    )
    op.create_index(
        "ix_message_waits_name_correlation_key", "message_waits", ["name", "correlation_key"]
    )
    op.create_table(
        "message_deliveries",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("message_ref", BIG_ID, nullable=False),
        sa.Column("process_id", sa.String(length=255), nullable=False),
        sa.Column("action", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("delivered_at", TS, nullable=True),
        sa.Column("claimed_by", sa.String(length=255), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["message_ref"],
            ["messages.id"],
            name=op.f("fk_message_deliveries_message_ref_messages"),
        ),
        sa.ForeignKeyConstraint(
            ["process_id"],
            ["processes.id"],
            name=op.f("fk_message_deliveries_process_id_processes"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_message_deliveries")),
        sa.UniqueConstraint(
            "message_ref", "process_id", name=op.f("uq_message_deliveries_message_ref_process_id")
        ),
    )
    op.create_index("ix_message_deliveries_status_id", "message_deliveries", ["status", "id"])


def downgrade() -> None:
    """Drop the three tables."""
    op.drop_index("ix_message_deliveries_status_id", table_name="message_deliveries")
    op.drop_table("message_deliveries")
    op.drop_index("ix_message_waits_name_correlation_key", table_name="message_waits")
    op.drop_table("message_waits")
    op.drop_index("ix_messages_expires_at", table_name="messages")
    op.drop_index("ix_messages_name_correlation_key_expires_at", table_name="messages")
    op.drop_table("messages")
