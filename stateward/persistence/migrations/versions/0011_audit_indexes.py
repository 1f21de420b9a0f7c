"""Audit log indexes (issue 16): events by recording time, and by actor and time.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30

`auditLog(filter, orderBy, first, after)` pages every event newest first by
(recorded_at, id); with an `actor` it range-scans (actor, recorded_at, id).
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the two indexes."""
    op.create_index("ix_events_recorded_at_id", "events", ["recorded_at", "id"])
    op.create_index("ix_events_actor_recorded_at_id", "events", ["actor", "recorded_at", "id"])


def downgrade() -> None:
    """Drop them."""
    op.drop_index("ix_events_actor_recorded_at_id", table_name="events")
    op.drop_index("ix_events_recorded_at_id", table_name="events")
