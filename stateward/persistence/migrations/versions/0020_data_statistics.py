"""A finer sample of instance data for PostgreSQL's planner (issue 18).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02

PostgreSQL estimates `data @> '{"customer": "c42"}'` from the column's histogram: the
share of its bounds the value contains. With the default statistics target (100) each
bound stands for 1 % of the rows, so a value that happens to be one bound is taken to
match 1 % of the instances, however rare it is. A data-filtered search ordered by creation
then walks the creation index, probing each instance's data, and when the few matches are
old it reads nearly the whole namespace (20,000 instances: ≈ 18,000 probes, 43 ms, where
the GIN index answers in 0.5 ms; docs/performance.md, "Session 14"). A target of 1,000
makes each bound 0.1 % of the rows, so a rare value is estimated as rare and the GIN index
is chosen; it costs ≈ 0.1 ms of planning per data-filtered search and a larger sample at
ANALYZE. The new target takes effect at the next ANALYZE (autovacuum's, or an operator's).
SQLite has no such setting.
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

#: The statistics target of `process_data.data` (PostgreSQL's default is 100).
DATA_STATISTICS = 1000


def _postgres() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def upgrade() -> None:
    """Sample `process_data.data` ten times finer at ANALYZE."""
    if _postgres():
        op.execute(f"ALTER TABLE process_data ALTER COLUMN data SET STATISTICS {DATA_STATISTICS}")


def downgrade() -> None:
    """Back to the server's default statistics target."""
    if _postgres():
        op.execute("ALTER TABLE process_data ALTER COLUMN data SET STATISTICS -1")
