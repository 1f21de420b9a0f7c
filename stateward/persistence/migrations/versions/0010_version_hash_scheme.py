"""Workflow version hashes cover state and action order (issue 12, DESIGN §2.3).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30

A version's `hash` is now sha256 of the RFC 8785 form of its order-keeping view (`states`
and `actions` as `[key, value]` pairs in authored order; `domain/versionhash.py`), and the
deploying event signs that order (`input.order`). Versions stored before this revision
were hashed over the RFC 8785 form itself, and the events that deployed them carry no
order: re-hashing them would leave the registry data (replayed from those events, with the
old hash) disagreeing with the rows. So they keep their hash and get `hash_scheme = 1`
(legacy: content covered, order not), while every version written from now on has
`hash_scheme = 2`.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """`workflow_versions.hash_scheme`, 1 for every existing version."""
    with op.batch_alter_table("workflow_versions") as batch:
        batch.add_column(sa.Column("hash_scheme", sa.Integer(), nullable=False, server_default="1"))


def downgrade() -> None:
    """Drop the column (scheme-2 hashes stay, and no longer verify under the old code)."""
    with op.batch_alter_table("workflow_versions") as batch:
        batch.drop_column("hash_scheme")
