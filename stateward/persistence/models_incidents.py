"""ORM model of incidents (issue 15): one row per failure that stopped an instance.

An incident is a read model kept by the core write path inside the event's transaction:
the event that puts an instance in status `error` opens one (or, while one is open after a
`$retry`, counts one more attempt on it); the event that takes the instance out of `error`
for good (a successful retry, a resolving action, a cancel) resolves it. Its id is derived
from the opening event, so a restore or replay gives the same id. A WEBHOOK_EXHAUSTED
incident is about one webhook delivery (`delivery_id`) and follows that delivery, never the
instance's status.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from stateward.persistence.models import Base
from stateward.persistence.types import UTCDateTime


class Incident(Base):
    """A failure that stopped an instance, open until resolved."""

    __tablename__ = "incidents"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    process_id: Mapped[str] = mapped_column(ForeignKey("processes.id"))
    namespace: Mapped[str] = mapped_column(String(255))
    workflow: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(255))
    message: Mapped[str] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer)
    opened_seq: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    resolved_seq: Mapped[int | None] = mapped_column(Integer)
    #: How it ended: `retried`, `action:<name>` or `cancelled` (None while open).
    resolution: Mapped[str | None] = mapped_column(String(300))
    #: The webhook delivery of a WEBHOOK_EXHAUSTED incident (its subject; None otherwise).
    delivery_id: Mapped[int | None] = mapped_column(BigInteger)

    __table_args__ = (
        Index("ix_incidents_namespace_created_at_id", "namespace", "created_at", "id"),
        Index("ix_incidents_created_at_id", "created_at", "id"),
        Index("ix_incidents_process_id_resolved_at", "process_id", "resolved_at"),
        Index("ix_incidents_delivery_id", "delivery_id"),
    )
