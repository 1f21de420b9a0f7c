"""Instance data in a table of its own, `process_data` (issue 18).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01

Every event updates its process's row, and every event changes indexed columns of it
(`updated_at`, `last_event_at`), so on PostgreSQL no such update is HOT: each index gets
an entry for the new row version. With the data in that row, the GIN index over it
(`jsonb_path_ops`, one entry per path of the document) took ≈ 2,400 entries for 64 KB of
data at every event, the data unchanged or not, and the row's new version carried the
data's (compressed) value again. In a row of its own the data is written, and indexed,
only by an event that changes it (docs/decisions.md, "Instance data in a table of its
own"). The data is copied over unchanged, in one statement; the GIN index and the lz4
compression of 0017 move with it. Downgrade copies it back.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
_HAS_LZ4 = sa.text(
    "SELECT count(*) FROM pg_settings "
    "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
)


def _postgres() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def _gin_on_data(name: str, table: str) -> None:
    """The search index of instance data (0006's): GIN, `jsonb_path_ops`."""
    op.create_index(
        name, table, ["data"], postgresql_using="gin", postgresql_ops={"data": "jsonb_path_ops"}
    )


def upgrade() -> None:
    """Create `process_data`, copy every process's data into it, drop `processes.data`."""
    op.create_table(
        "process_data",
        sa.Column("process_id", sa.String(length=255), nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["process_id"],
            ["processes.id"],
            name=op.f("fk_process_data_process_id_processes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("process_id", name=op.f("pk_process_data")),
    )
    postgres = _postgres()
    if postgres and op.get_bind().execute(_HAS_LZ4).scalar():
        op.execute("ALTER TABLE process_data ALTER COLUMN data SET COMPRESSION lz4")
    op.execute("INSERT INTO process_data (process_id, data) SELECT id, data FROM processes")
    if postgres:
        op.drop_index("ix_processes_data", table_name="processes")
        _gin_on_data("ix_process_data_data", "process_data")
    # SQLite (3.35+) drops a column in place: no index or constraint names it.
    op.execute("ALTER TABLE processes DROP COLUMN data")


def downgrade() -> None:
    """Put the data back into `processes.data` and drop `process_data`."""
    postgres = _postgres()
    if postgres:
        op.add_column("processes", sa.Column("data", JSON, nullable=True))
    else:  # SQLite adds a NOT NULL column only with a default
        op.add_column(
            "processes", sa.Column("data", JSON, nullable=False, server_default=sa.text("'{}'"))
        )
    op.execute(
        "UPDATE processes SET data = "
        "(SELECT d.data FROM process_data d WHERE d.process_id = processes.id)"
    )
    if postgres:
        op.alter_column("processes", "data", nullable=False)
        op.drop_index("ix_process_data_data", table_name="process_data")
        _gin_on_data("ix_processes_data", "processes")
        if op.get_bind().execute(_HAS_LZ4).scalar():
            op.execute("ALTER TABLE processes ALTER COLUMN data SET COMPRESSION lz4")
    op.drop_table("process_data")
