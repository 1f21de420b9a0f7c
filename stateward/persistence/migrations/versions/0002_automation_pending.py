"""Automation recovery: `processes.automation_at` and its pending-only partial index.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

`automation_at` is when the automation of the current `system` state was last started (the
event that entered the state, or a recovery sweep's claim); NULL when the current state
awaits no hook. The ticker's recovery sweep finds instances left waiting in a system state
(their node died between the commit and the hook run) with a range scan of
`ix_processes_automation_pending`, which holds only live rows with a pending automation.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)
PENDING = "automation_at IS NOT NULL AND status IN ('active', 'stale')"


def upgrade() -> None:
    """Add the column (NULL for existing rows) and the partial index."""
    with op.batch_alter_table("processes") as batch:
        batch.add_column(sa.Column("automation_at", TS, nullable=True))
    op.create_index(
        "ix_processes_automation_pending",
        "processes",
        ["automation_at"],
        unique=False,
        sqlite_where=sa.text(PENDING),
        postgresql_where=sa.text(PENDING),
    )


def downgrade() -> None:
    """Drop the index and the column."""
    op.drop_index("ix_processes_automation_pending", table_name="processes")
    with op.batch_alter_table("processes") as batch:
        batch.drop_column("automation_at")
