"""ORM models of message correlation (issue 15): published messages, the waits of
instances (the correlation index) and per-instance deliveries (claim rows).

`message_waits` holds one row per (instance, message) an instance waits for in its
current state, with the correlation key read from its data when it entered the state
(or when its data changed): a publish finds its instances by the index
`(name, correlation_key)`, never by reading instance data. `message_deliveries` is
unique per (message, instance): a message reaches an instance at most once, and its
pending -> delivered update is what makes it exactly once across nodes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from stateward.persistence.models import Base, BigId
from stateward.persistence.types import JSONType, UTCDateTime


class Message(Base):
    """A published message, kept until `expires_at` for instances still to arrive."""

    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(128))
    correlation_key: Mapped[str] = mapped_column(String(512))
    message_id: Mapped[str] = mapped_column(String(255))
    payload: Mapped[Any] = mapped_column(JSONType)
    publisher: Mapped[str] = mapped_column(String(255))
    published_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        UniqueConstraint("namespace", "name", "message_id"),
        Index(
            "ix_messages_name_correlation_key_expires_at", "name", "correlation_key", "expires_at"
        ),
        Index("ix_messages_expires_at", "expires_at"),
    )


class MessageWait(Base):
    """An instance waits for message `name` with `correlation_key` (to perform `action`)."""

    __tablename__ = "message_waits"

    process_id: Mapped[str] = mapped_column(ForeignKey("processes.id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    correlation_key: Mapped[str] = mapped_column(String(512))
    action: Mapped[str] = mapped_column(String(255))
    namespace: Mapped[str] = mapped_column(String(255))

    __table_args__ = (Index("ix_message_waits_name_correlation_key", "name", "correlation_key"),)


class MessageDelivery(Base):
    """A message to perform on one instance: pending until its `$message` event."""

    __tablename__ = "message_deliveries"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    message_ref: Mapped[int] = mapped_column(ForeignKey("messages.id"))
    process_id: Mapped[str] = mapped_column(ForeignKey("processes.id"))
    action: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16))  # pending|delivered|not_applicable
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    claimed_by: Mapped[str | None] = mapped_column(String(255))
    detail: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        UniqueConstraint("message_ref", "process_id"),
        Index("ix_message_deliveries_status_id", "status", "id"),
    )
