"""ORM models of the deployment log: Merkle leaves and nodes, the head, checkpoints.

`log_nodes` level 0 gives every committed event (`event_id`) its deployment-wide log
index (gap-free, assigned in commit order under the global sequencing lock) and its leaf
hash; the levels above keep every completed perfect subtree (about one per leaf, never
rewritten); `log_head` is the one row holding the tree size and its frontier (the
roots of the perfect subtrees tiling it), so an append reads one row, never a rescan.
`checkpoints` keeps the signed tree heads.

`log_nodes` is keyed by `(level, idx)` alone — a `WITHOUT ROWID` table on SQLite, so a
node is one B-tree entry — with 32-byte binary hashes; the leaf's `event_id` has a
partial unique index over the leaves only (inner nodes have none) and no foreign key
(`verify` checks every leaf against its event). Migration 0016 made it so (it was a rowid
table with 64-character hex hashes, a unique `event_id` over every row and a foreign key).
The head's frontier and checkpoint roots stay lower-case hex.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, LargeBinary, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from stateward.persistence.models import Base, BigId
from stateward.persistence.types import UTCDateTime

#: The rows of `log_nodes` that are leaves (the partial index on `event_id`).
LEAVES = "event_id IS NOT NULL"


class LogNode(Base):
    """A perfect subtree over leaves [idx * 2**level, (idx + 1) * 2**level): at level 0 a
    leaf (its event's log index `idx` and `event_id`), above it a completed inner node."""

    __tablename__ = "log_nodes"

    level: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    idx: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    hash: Mapped[bytes] = mapped_column(LargeBinary(32))
    event_id: Mapped[int | None] = mapped_column(BigId)

    __table_args__ = (
        Index(
            "ix_log_nodes_event_id",
            "event_id",
            unique=True,
            sqlite_where=text(LEAVES),
            postgresql_where=text(LEAVES),
        ),
        {"sqlite_with_rowid": False},
    )


class LogHead(Base):
    """The one row (id 1): tree size and frontier hashes (JSON list, largest first)."""

    __tablename__ = "log_head"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    size: Mapped[int] = mapped_column(BigInteger)
    frontier: Mapped[str] = mapped_column(Text)


class Checkpoint(Base):
    """A signed tree head `{net, size, root, ts}` (body: the RFC 8785 text signed)."""

    __tablename__ = "checkpoints"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    size: Mapped[int] = mapped_column(BigInteger)
    root: Mapped[str] = mapped_column(String(64))
    ts: Mapped[datetime] = mapped_column(UTCDateTime())
    signer: Mapped[str] = mapped_column(String(255))
    signature: Mapped[str] = mapped_column(String(255))
    body: Mapped[str] = mapped_column(Text)

    __table_args__ = (Index("ix_checkpoints_signer_size", "signer", "size"),)
