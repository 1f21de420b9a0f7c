"""Delegated stages (issue 13): `delegated_tasks`, one row per stay in a `delegated` state.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30

A task is opened by the event that enters a `delegated` state and closed by the one that
leaves it. It holds the sha256 of the one callback token that may complete it now and a
worker's lease (`lockDelegatedTask`). Instances already in a delegated state when this
revision runs get no task (they were never handed over): a team member moves them on.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the table and its indexes."""
    op.create_table(
        "delegated_tasks",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("process_id", sa.String(length=255), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("workflow", sa.String(length=255), nullable=False),
        sa.Column("state", sa.String(length=255), nullable=False),
        sa.Column("surface", sa.String(length=255), nullable=False),
        sa.Column("entered_seq", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=True),
        sa.Column("token_expires_at", TS, nullable=True),
        sa.Column("locked_by", sa.String(length=255), nullable=True),
        sa.Column("locked_until", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("closed_at", TS, nullable=True),
        sa.ForeignKeyConstraint(
            ["process_id"], ["processes.id"], name=op.f("fk_delegated_tasks_process_id_processes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_delegated_tasks")),
    )
    op.create_index(
        "ix_delegated_tasks_status_surface_created_at",
        "delegated_tasks",
        ["status", "surface", "created_at"],
    )
    op.create_index(
        "ix_delegated_tasks_process_id_status", "delegated_tasks", ["process_id", "status"]
    )
    op.create_index("ix_delegated_tasks_token_hash", "delegated_tasks", ["token_hash"], unique=True)


def downgrade() -> None:
    """Drop the table."""
    op.drop_index("ix_delegated_tasks_token_hash", table_name="delegated_tasks")
    op.drop_index("ix_delegated_tasks_process_id_status", table_name="delegated_tasks")
    op.drop_index("ix_delegated_tasks_status_surface_created_at", table_name="delegated_tasks")
    op.drop_table("delegated_tasks")
