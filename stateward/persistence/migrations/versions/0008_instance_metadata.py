"""Instance metadata (seed §3b): `processes.instance_metadata`, set by `$start`.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30

The `metadata` object given to `startInstance` (recorded in the `$start` event's input, so
`verify` checks the column against the log). Not part of the instance data: expressions and
routing never see it; hooks, delegated surfaces and the API read it. NULL for instances
started without metadata and for every instance made before this revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    """Add the column (NULL for existing rows)."""
    with op.batch_alter_table("processes") as batch:
        batch.add_column(sa.Column("instance_metadata", JSON, nullable=True))


def downgrade() -> None:
    """Drop the column (in place: SQLite >= 3.35 drops a plain column without rebuilding the
    table, and a rebuild would DROP `processes` under the rows that reference it)."""
    op.drop_column("processes", "instance_metadata")
