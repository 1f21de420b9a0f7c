"""Drop `ix_events_hash`: no query reads events by their chain hash (issue 18).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01

The index was made with the table and never used: reads go by id, by (process, seq), by
identity, by (actor, nonce) and by time; `verify` walks each process's chain in seq
order. Its keys are hashes, so every new event wrote into a random leaf page of it: at a
group-commit batch of 200 events, ≈ 200 more pages through the WAL per commit, a share
that grew with the log (`bench/api.py` `submitEvents`, 10k → 90k events: the SQLite
commit's CPU per event 41 → 79 µs with it, 36 → 64 µs without; docs/performance.md,
`hashidx18`). Downgrade creates it again.
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Drop the unused index on `events.hash`."""
    op.drop_index("ix_events_hash", table_name="events")


def downgrade() -> None:
    """Create it again."""
    op.create_index("ix_events_hash", "events", ["hash"], unique=False)
