"""log_nodes compact: keyed by (level, idx) only, 32-byte binary hashes (issue 12).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01

Before, every node was a rowid row with a 64-character hex hash, and `event_id` carried a
unique constraint over every row (inner nodes included) and a foreign key to `events`:
about two rows per event, each into three B-trees plus a foreign-key check. Now the
table is keyed by `(level, idx)` alone (SQLite: `WITHOUT ROWID`, one B-tree), the hash
is the 32 raw bytes, and only the leaves' `event_id` is indexed (partial unique index,
`event_id IS NOT NULL`), without a foreign key (`verify` checks every leaf against its
event). The nodes, their indexes and hashes are carried over unchanged (hex decoded);
`log_head` and the checkpoints keep hex.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
LEAVES = "event_id IS NOT NULL"
BATCH = 5000


def _copy(source: str, target: str, convert: Callable[[Any], Any]) -> None:
    """Copy every node of `source` into `target` in (level, idx) order, `convert`ing the
    hash (keyset pages, so a large log is never held in memory at once)."""
    conn = op.get_bind()
    dest = sa.table(
        target, sa.column("level"), sa.column("idx"), sa.column("hash"), sa.column("event_id")
    )
    level, idx = -1, -1
    while True:
        rows = conn.execute(
            sa.text(
                f"SELECT level, idx, hash, event_id FROM {source} "
                "WHERE level > :l OR (level = :l AND idx > :i) ORDER BY level, idx LIMIT :n"
            ),
            {"l": level, "i": idx, "n": BATCH},
        ).all()
        if not rows:
            return
        conn.execute(
            dest.insert(),
            [
                {"level": r.level, "idx": r.idx, "hash": convert(r.hash), "event_id": r.event_id}
                for r in rows
            ],
        )
        level, idx = rows[-1].level, rows[-1].idx


def upgrade() -> None:
    """Rebuild `log_nodes` (SQLite) or alter it in place (PostgreSQL)."""
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("fk_log_nodes_event_id_events", "log_nodes", type_="foreignkey")
        op.drop_constraint("uq_log_nodes_event_id", "log_nodes", type_="unique")
        op.execute("ALTER TABLE log_nodes ALTER COLUMN hash TYPE bytea USING decode(hash, 'hex')")
    else:
        op.create_table(
            "log_nodes_compact",
            sa.Column("level", sa.Integer(), autoincrement=False, nullable=False),
            sa.Column("idx", sa.BigInteger(), autoincrement=False, nullable=False),
            sa.Column("hash", sa.LargeBinary(length=32), nullable=False),
            sa.Column("event_id", BIG_ID, nullable=True),
            sa.PrimaryKeyConstraint("level", "idx", name="pk_log_nodes"),
            sqlite_with_rowid=False,
        )
        _copy("log_nodes", "log_nodes_compact", bytes.fromhex)
        op.drop_table("log_nodes")
        op.rename_table("log_nodes_compact", "log_nodes")
    op.create_index(
        "ix_log_nodes_event_id",
        "log_nodes",
        ["event_id"],
        unique=True,
        sqlite_where=sa.text(LEAVES),
        postgresql_where=sa.text(LEAVES),
    )


def downgrade() -> None:
    """Back to the rowid table with hex hashes, a unique `event_id` and its foreign key."""
    op.drop_index("ix_log_nodes_event_id", table_name="log_nodes")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "ALTER TABLE log_nodes ALTER COLUMN hash TYPE varchar(64) USING encode(hash, 'hex')"
        )
        op.create_unique_constraint("uq_log_nodes_event_id", "log_nodes", ["event_id"])
        op.create_foreign_key(
            "fk_log_nodes_event_id_events", "log_nodes", "events", ["event_id"], ["id"]
        )
        return
    op.create_table(
        "log_nodes_rowid",
        sa.Column("level", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("idx", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("event_id", BIG_ID, nullable=True),
        sa.ForeignKeyConstraint(["event_id"], ["events.id"], name="fk_log_nodes_event_id_events"),
        sa.PrimaryKeyConstraint("level", "idx", name="pk_log_nodes"),
        sa.UniqueConstraint("event_id", name="uq_log_nodes_event_id"),
    )
    _copy("log_nodes", "log_nodes_rowid", lambda h: bytes(h).hex())
    op.drop_table("log_nodes")
    op.rename_table("log_nodes_rowid", "log_nodes")
