"""Analytics read model: `state_visits`, one row per stay of an instance in a state; backfilled.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

Typed analytics (`Workflow.analytics`) aggregate this table in SQL. Every event that enters
or leaves a state writes it from this revision on. A database made before it has no history
of visits: each existing instance gets one row for the state it is in (entered at its
`state_entered_at`; closed as its status says when it has ended), so `current`, counts and
SLA compliance of open visits are right at once, and dwell and cycle time fill as instances
move on.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
BATCH = 1000
ENDED = {"completed": "completed", "cancelled": "cancelled", "error": "error"}


def _ms(value: datetime | str | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


def upgrade() -> None:
    """Create the table and its indexes, then one visit per existing instance."""
    visits = op.create_table(
        "state_visits",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("process_id", sa.String(length=255), nullable=False),
        sa.Column("workflow", sa.String(length=255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=255), nullable=False),
        sa.Column("entered_seq", sa.Integer(), nullable=False),
        sa.Column("entered_ms", sa.BigInteger(), nullable=False),
        sa.Column("left_ms", sa.BigInteger(), nullable=True),
        sa.Column("ended", sa.String(length=16), nullable=False),
        sa.Column("due_ms", sa.BigInteger(), nullable=True),
        sa.Column("breached", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["process_id"], ["processes.id"], name=op.f("fk_state_visits_process_id_processes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_state_visits")),
    )
    op.create_index(
        "ix_state_visits_process_id_ended", "state_visits", ["process_id", "ended"], unique=False
    )
    op.create_index(
        "ix_state_visits_workflow_entered_ms",
        "state_visits",
        ["workflow", "entered_ms"],
        unique=False,
    )
    op.create_index(
        "ix_state_visits_workflow_left_ms", "state_visits", ["workflow", "left_ms"], unique=False
    )
    rows = (
        op.get_bind()
        .execute(
            sa.text(
                "SELECT id, workflow, workflow_version, state, status, seq, state_entered_at,"
                " last_event_at, sla_due_at, sla_breached_at FROM processes"
                " WHERE kind = 'instance' ORDER BY id"
            )
        )
        .fetchall()
    )
    batch: list[dict[str, object]] = []
    for r in rows:
        ended = ENDED.get(r.status, "")
        batch.append(
            {
                "process_id": r.id,
                "workflow": r.workflow,
                "version": r.workflow_version,
                "state": r.state,
                "entered_seq": r.seq,
                "entered_ms": _ms(r.state_entered_at),
                "left_ms": _ms(r.last_event_at) if ended else None,
                "ended": ended,
                "due_ms": _ms(r.sla_due_at),
                "breached": r.sla_breached_at is not None,
            }
        )
        if len(batch) >= BATCH:
            op.bulk_insert(visits, batch)
            batch = []
    if batch:
        op.bulk_insert(visits, batch)


def downgrade() -> None:
    """Drop the table."""
    op.drop_index("ix_state_visits_workflow_left_ms", table_name="state_visits")
    op.drop_index("ix_state_visits_workflow_entered_ms", table_name="state_visits")
    op.drop_index("ix_state_visits_process_id_ended", table_name="state_visits")
    op.drop_table("state_visits")
