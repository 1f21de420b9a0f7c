"""Drop `uq_events_identity`: the unique (actor, nonce) already keeps an envelope from
being stored twice (issue 18).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02

An event's identity is the sha256 of its envelope's canonical bytes, which hold the
envelope's actor and nonce: two rows with one identity would share an (actor, nonce),
which `uq_events_actor_nonce` refuses. DESIGN §3 names only (process_id, seq) and
(actor, nonce) as the log's unique keys. The identity index's keys are hashes, so each
new event wrote into a random leaf page of it and every group-commit batch's COMMIT
carried about one more page per event through the WAL, a cost that grew with the log:
`submitEvents` on a log of ≈ 150k events, 4,610 / 4,764 → 5,407 / 5,315 events/s, the
COMMIT 6.8–7.2 → 3.9–4.3 ms per batch of 200 (docs/performance.md, `grow18`). Lookups by identity
(a resubmission's original) go through (actor, nonce) instead
(`EventRepository.originals`). SQLite rebuilds the table (a unique constraint is its
own index there; `db.init_schema` runs this with foreign keys off and checks them
before the COMMIT). Downgrade creates the constraint again.
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Drop the unique constraint on `events.identity`."""
    with op.batch_alter_table("events") as batch:
        batch.drop_constraint("uq_events_identity", type_="unique")


def downgrade() -> None:
    """Create it again."""
    with op.batch_alter_table("events") as batch:
        batch.create_unique_constraint("uq_events_identity", ["identity"])
