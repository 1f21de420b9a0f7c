"""ORM models of bulk operations (issue 15): a batch and one claim row per instance.

`batch_items` is the batch's membership, fixed when it is created (the instances its filter
matched then), and its progress: an item goes pending -> claimed (by a node, with a lease)
-> succeeded | failed | skipped. Claims use `FOR UPDATE SKIP LOCKED` on PostgreSQL, and
every item's event carries a nonce derived from (batch, instance), so the `(actor, nonce)`
uniqueness of `events` applies a batch at most once per instance, whatever crashes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from stateward.persistence.models import Base
from stateward.persistence.types import JSONType, UTCDateTime


class BatchOperation(Base):
    """A bulk operation: what, over which instances, by whom, how far."""

    __tablename__ = "batch_operations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # cancel|migrate|retry|action
    filter: Mapped[Any] = mapped_column(JSONType)
    params: Mapped[Any] = mapped_column(JSONType)
    status: Mapped[str] = mapped_column(String(16))  # running|completed|cancelled
    total: Mapped[int] = mapped_column(Integer)
    succeeded: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    created_by: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (Index("ix_batch_operations_status", "status"),)


class BatchItem(Base):
    """One instance of a batch and what the batch did to it."""

    __tablename__ = "batch_items"

    batch_id: Mapped[str] = mapped_column(ForeignKey("batch_operations.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    process_id: Mapped[str] = mapped_column(ForeignKey("processes.id"))
    status: Mapped[str] = mapped_column(String(16))  # pending|claimed|succeeded|failed|skipped
    claimed_by: Mapped[str | None] = mapped_column(String(255))
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    code: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (Index("ix_batch_items_batch_id_status", "batch_id", "status"),)
