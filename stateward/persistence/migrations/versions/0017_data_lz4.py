"""processes.data compressed with lz4 on PostgreSQL (issue 18).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01

Every event that changes an instance's data writes the whole jsonb value again; above
≈ 2 KB PostgreSQL compresses it into TOAST, with pglz by default. lz4 compresses the
same value at a fraction of pglz's CPU (a 64 KB value: ≈ 1.3 → ≈ 0.8 ms of server CPU
per UPDATE here; docs/performance.md, `data18b`). Only new values use it: rows written
before keep their pglz values, readable as ever, until their next event rewrites them —
nothing is copied. Skipped where the server has no lz4 (built without it, or older than
14: `default_toast_compression` then does not list it) and on SQLite.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_HAS_LZ4 = sa.text(
    "SELECT count(*) FROM pg_settings "
    "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
)


def _lz4_available() -> bool:
    bind = op.get_bind()
    return bind.dialect.name == "postgresql" and bool(bind.execute(_HAS_LZ4).scalar())


def upgrade() -> None:
    """Compress new values of `processes.data` with lz4 where the server can."""
    if _lz4_available():
        op.execute("ALTER TABLE processes ALTER COLUMN data SET COMPRESSION lz4")


def downgrade() -> None:
    """Back to the server's default compression for new values."""
    if _lz4_available():
        op.execute("ALTER TABLE processes ALTER COLUMN data SET COMPRESSION default")
