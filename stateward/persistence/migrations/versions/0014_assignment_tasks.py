"""Assignments as tasks (issue 16): priority, due and follow-up dates, candidate users.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-30

`assignments(filter, orderBy, first, after, last, before)` pages assignments by due date,
priority or creation time, each with the id as tie-breaker: one index per order so the
keyset range scan never sorts. `assignment_candidates` holds one row per candidate user
of an assignment, so `filter: {candidate}` (and `myAssignments`) is an index lookup, not
a scan of a JSON list. Every column is NULL for assignments opened before this revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    """Add the columns, the candidates table and the ordering indexes."""
    with op.batch_alter_table("assignments") as batch:
        batch.add_column(sa.Column("priority", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("due_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("follow_up_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("candidate_users", JSON, nullable=True))
    op.create_index("ix_assignments_created_at_id", "assignments", ["created_at", "id"])
    op.create_index("ix_assignments_due_at_id", "assignments", ["due_at", "id"])
    op.create_index("ix_assignments_priority_id", "assignments", ["priority", "id"])
    op.create_table(
        "assignment_candidates",
        sa.Column(
            "assignment_id", sa.String(64), sa.ForeignKey("assignments.id"), primary_key=True
        ),
        sa.Column("candidate", sa.String(255), primary_key=True),
    )
    op.create_index("ix_assignment_candidates_candidate", "assignment_candidates", ["candidate"])


def downgrade() -> None:
    """Drop them (columns in place, as 0008 does)."""
    op.drop_index("ix_assignment_candidates_candidate", table_name="assignment_candidates")
    op.drop_table("assignment_candidates")
    op.drop_index("ix_assignments_priority_id", table_name="assignments")
    op.drop_index("ix_assignments_due_at_id", table_name="assignments")
    op.drop_index("ix_assignments_created_at_id", table_name="assignments")
    op.drop_column("assignments", "candidate_users")
    op.drop_column("assignments", "follow_up_at")
    op.drop_column("assignments", "due_at")
    op.drop_column("assignments", "priority")
