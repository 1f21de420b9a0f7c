"""Bulk operations (issue 15): batches and their per-instance claim rows.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    """Create `batch_operations` and `batch_items`."""
    op.create_table(
        "batch_operations",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("filter", JSON, nullable=False),
        sa.Column("params", JSON, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("succeeded", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batch_operations")),
    )
    op.create_index("ix_batch_operations_status", "batch_operations", ["status"])
    op.create_table(
        "batch_items",
        sa.Column("batch_id", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("process_id", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("claimed_by", sa.String(length=255), nullable=True),
        sa.Column("claimed_at", TS, nullable=True),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("code", sa.String(length=64), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["batch_id"],
            ["batch_operations.id"],
            name=op.f("fk_batch_items_batch_id_batch_operations"),
        ),
        sa.ForeignKeyConstraint(
            ["process_id"], ["processes.id"], name=op.f("fk_batch_items_process_id_processes")
        ),
        sa.PrimaryKeyConstraint("batch_id", "position", name=op.f("pk_batch_items")),
    )
    op.create_index("ix_batch_items_batch_id_status", "batch_items", ["batch_id", "status"])


def downgrade() -> None:
    """Drop both tables."""
    op.drop_index("ix_batch_items_batch_id_status", table_name="batch_items")
    op.drop_table("batch_items")
    op.drop_index("ix_batch_operations_status", table_name="batch_operations")
    op.drop_table("batch_operations")
