"""Incidents (issue 15): a row per failure that stopped an instance.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-30

`incidents(filter, first, after)` pages newest first by (created_at, id), within a
namespace by (namespace, created_at, id); the write path finds a process's open incident
by (process_id, resolved_at).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create `incidents` and its indexes."""
    op.create_table(
        "incidents",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("process_id", sa.String(length=255), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("workflow", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=255), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("opened_seq", sa.Integer(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("resolved_at", TS, nullable=True),
        sa.Column("resolved_seq", sa.Integer(), nullable=True),
        sa.Column("resolution", sa.String(length=300), nullable=True),
        sa.ForeignKeyConstraint(
            ["process_id"], ["processes.id"], name=op.f("fk_incidents_process_id_processes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
    )
    op.create_index(
        "ix_incidents_namespace_created_at_id", "incidents", ["namespace", "created_at", "id"]
    )
    op.create_index("ix_incidents_created_at_id", "incidents", ["created_at", "id"])
    op.create_index(
        "ix_incidents_process_id_resolved_at", "incidents", ["process_id", "resolved_at"]
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_incidents_process_id_resolved_at", table_name="incidents")
    op.drop_index("ix_incidents_created_at_id", table_name="incidents")
    op.drop_index("ix_incidents_namespace_created_at_id", table_name="incidents")
    op.drop_table("incidents")
