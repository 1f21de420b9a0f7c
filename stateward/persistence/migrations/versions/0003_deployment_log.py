"""The deployment log: Merkle nodes (leaves at level 0), head and checkpoints; backfilled.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Every event gets a deployment-wide log index and a leaf in one Merkle tree (RFC 9162
§2.1; layout in `stateward.domain.logformat`). A database made before this revision has
events but no log: they are appended here in a deterministic order — `events.id`, which
is the insertion order (commit order on SQLite) — so every node migrating the same
database computes the same tree.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from stateward.domain import merkle
from stateward.domain.logformat import leaf_data

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)
BATCH = 1000


def upgrade() -> None:
    """Create the tables, then append every existing event in `events.id` order."""
    op.create_table(
        "log_nodes",
        sa.Column("level", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("idx", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("event_id", BIG_ID, nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_log_nodes_event_id_events")
        ),
        sa.PrimaryKeyConstraint("level", "idx", name=op.f("pk_log_nodes")),
        sa.UniqueConstraint("event_id", name=op.f("uq_log_nodes_event_id")),
    )
    op.create_table(
        "log_head",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("frontier", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_head")),
    )
    op.create_table(
        "checkpoints",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("root", sa.String(length=64), nullable=False),
        sa.Column("ts", TS, nullable=False),
        sa.Column("signer", sa.String(length=255), nullable=False),
        sa.Column("signature", sa.String(length=255), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkpoints")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_checkpoints_signer_size", "checkpoints", ["signer", "size"], unique=False)
    _backfill()


def _backfill() -> None:
    conn = op.get_bind()
    nodes = sa.table(
        "log_nodes", sa.column("level"), sa.column("idx"), sa.column("hash"), sa.column("event_id")
    )
    frontier: list[bytes] = []
    size, after = 0, 0
    while True:
        rows = conn.execute(
            sa.text(
                "SELECT id, process_id, seq, signer, hash FROM events WHERE id > :a "
                "ORDER BY id LIMIT :n"
            ),
            {"a": after, "n": BATCH},
        ).all()
        if not rows:
            break
        node_rows: list[dict[str, object]] = []
        for row in rows:
            leaf = merkle.leaf_hash(leaf_data(row.process_id, row.seq, row.signer, row.hash))
            frontier, created = merkle.append(frontier, size, leaf)
            node_rows.extend(
                {"level": lv, "idx": ix, "hash": h.hex(), "event_id": None if lv else row.id}
                for lv, ix, h in created
            )
            size += 1
            after = row.id
        conn.execute(nodes.insert(), node_rows)
    head = sa.table("log_head", sa.column("id"), sa.column("size"), sa.column("frontier"))
    conn.execute(
        head.insert(),
        [{"id": 1, "size": size, "frontier": json.dumps([h.hex() for h in frontier])}],
    )


def downgrade() -> None:
    """Drop the log tables."""
    op.drop_index("ix_checkpoints_signer_size", table_name="checkpoints")
    op.drop_table("checkpoints")
    op.drop_table("log_head")
    op.drop_table("log_nodes")
