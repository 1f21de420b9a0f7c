"""Node trust is governed by signed `trust_node` / `distrust_node` events (issue 12).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30

Before this revision every node that opened the database appended its key to the
unsigned `meta.trusted_signers` row, and that row decided which node keys may attest
events. From now on only `trust_node` / `distrust_node` events of the system registry
do. The existing row becomes `meta.legacy_trusted_nodes`: the keys in it attested the
history written so far, so they count as trusted from log index 0 (the export header's
`legacy_nodes`) until a `distrust_node` withdraws them; nothing adds to the row again.
Downgrade renames it back.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

OLD, NEW = "trusted_signers", "legacy_trusted_nodes"


def _rename(old: str, new: str) -> None:
    op.execute(sa.text("UPDATE meta SET key = :new WHERE key = :old").bindparams(old=old, new=new))


def upgrade() -> None:
    """`meta.trusted_signers` -> `meta.legacy_trusted_nodes` (same JSON list)."""
    _rename(OLD, NEW)


def downgrade() -> None:
    """The legacy row goes back to being the (unsigned) trusted list."""
    _rename(NEW, OLD)
