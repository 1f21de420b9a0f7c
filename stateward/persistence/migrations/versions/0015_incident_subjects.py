"""Webhook and timer incidents (issue 15): a delivery knows its instance, an incident its delivery.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-30

`webhook_deliveries.process_id` is the instance whose event queued the delivery: when the
delivery exhausts its retries, a `$webhook` event on that instance opens a
WEBHOOK_EXHAUSTED incident whose `incidents.delivery_id` names it (a retried delivery that
succeeds resolves the incident found by that index). Both NULL for rows written before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two columns and the delivery index."""
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.add_column(sa.Column("process_id", sa.String(length=255), nullable=True))
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("delivery_id", sa.BigInteger(), nullable=True))
    op.create_index("ix_incidents_delivery_id", "incidents", ["delivery_id"])


def downgrade() -> None:
    """Drop them."""
    op.drop_index("ix_incidents_delivery_id", table_name="incidents")
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("delivery_id")
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_column("process_id")
