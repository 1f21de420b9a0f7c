"""Search indexes (issue 16): keyset order by time, and a GIN index on instance data.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30

`instances(filter, orderBy)` pages by (created_at, id) or (updated_at, id) with row-value
comparisons, which these two B-tree indexes answer by range scans. On PostgreSQL the data
conditions compile to jsonb containment (`data @> ...`) and jsonpath tests (`@?`), which
the GIN index `ix_processes_data` (`jsonb_path_ops`) answers; SQLite has no such index
(its JSON1 conditions scan the rows the other conditions leave).
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the indexes (the GIN one on PostgreSQL only)."""
    op.create_index("ix_processes_created_at_id", "processes", ["created_at", "id"])
    op.create_index("ix_processes_updated_at_id", "processes", ["updated_at", "id"])
    if op.get_bind().dialect.name == "postgresql":
        op.create_index(
            "ix_processes_data",
            "processes",
            ["data"],
            postgresql_using="gin",
            postgresql_ops={"data": "jsonb_path_ops"},
        )


def downgrade() -> None:
    """Drop them."""
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_processes_data", table_name="processes")
    op.drop_index("ix_processes_updated_at_id", table_name="processes")
    op.drop_index("ix_processes_created_at_id", table_name="processes")
