"""Notifications for actors and teams; namespace webhooks and their delivery queue."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, insert, select, update

from stateward.persistence.base import Repository, to_record
from stateward.persistence.models_ops import Notification, Webhook, WebhookDelivery
from stateward.records import DeliveryRecord, NotificationRecord, WebhookRecord

N = cast(Table, Notification.__table__)
H = cast(Table, Webhook.__table__)
D = cast(Table, WebhookDelivery.__table__)
PENDING = "pending"
DELIVERED = "delivered"
FAILED = "failed"


def team_recipient(team: str) -> str:
    """The recipient id of a whole team."""
    return f"team:{team}"


class NotificationRepository(Repository):
    """`notifications` rows, newest first per recipient."""

    async def add(
        self,
        recipient: str,
        namespace: str,
        kind: str,
        payload: Any,
        now: datetime,
        *,
        process_id: str | None = None,
    ) -> NotificationRecord:
        """Store a notification for an actor id or `team:<name>`."""
        stmt = (
            insert(N)
            .values(
                recipient=recipient,
                namespace=namespace,
                process_id=process_id,
                kind=kind,
                payload=payload,
                created_at=now,
            )
            .returning(*N.c)
        )
        return to_record(NotificationRecord, (await self.session.execute(stmt)).one())

    async def get(self, ident: int) -> NotificationRecord | None:
        """The notification `ident`, or None."""
        row = (await self.session.execute(select(N).where(N.c.id == ident))).one_or_none()
        return None if row is None else to_record(NotificationRecord, row)

    async def for_recipients(
        self,
        recipients: Sequence[str],
        *,
        unread_only: bool = False,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[NotificationRecord]:
        """Notifications of any of `recipients` (an actor and its teams), newest first."""
        stmt = select(N).where(N.c.recipient.in_(list(recipients))).order_by(N.c.id.desc())
        if unread_only:
            stmt = stmt.where(N.c.read_at.is_(None))
        if before_id is not None:
            stmt = stmt.where(N.c.id < before_id)
        rows = await self.session.execute(stmt.limit(limit))
        return [to_record(NotificationRecord, r) for r in rows]

    async def mark_read(self, ids: Sequence[int], recipients: Sequence[str], now: datetime) -> int:
        """Mark notifications read (only those addressed to `recipients`)."""
        stmt = (
            update(N)
            .where(
                N.c.id.in_(list(ids)), N.c.recipient.in_(list(recipients)), N.c.read_at.is_(None)
            )
            .values(read_at=now)
        )
        return int((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]


class WebhookRepository(Repository):
    """The webhook of each namespace and the deliveries queued for it."""

    async def set(
        self,
        namespace: str,
        url: str | None,
        secret: str | None,
        now: datetime,
        event_id: int | None = None,
    ) -> None:
        """Set (or, with `url` None, remove) the webhook of `namespace`."""
        existing = await self.get(namespace)
        if url is None:
            if existing is not None:
                await self.session.execute(H.delete().where(H.c.namespace == namespace))
            return
        values = dict(url=url, secret=secret, updated_at=now, event_id=event_id)
        if existing is None:
            await self.session.execute(insert(H).values(namespace=namespace, **values))
        else:
            await self.session.execute(update(H).where(H.c.namespace == namespace).values(**values))

    async def get(self, namespace: str) -> WebhookRecord | None:
        """The webhook of `namespace`, or None."""
        row = (
            await self.session.execute(select(H).where(H.c.namespace == namespace))
        ).one_or_none()
        return None if row is None else to_record(WebhookRecord, row)

    async def enqueue(
        self,
        namespace: str,
        url: str,
        event_type: str,
        body: str,
        now: datetime,
        *,
        process_id: str | None = None,
    ) -> DeliveryRecord:
        """Queue a delivery, due now (`process_id`: the instance whose event queued it)."""
        stmt = (
            insert(D)
            .values(
                namespace=namespace,
                url=url,
                event_type=event_type,
                body=body,
                status=PENDING,
                attempts=0,
                next_attempt_at=now,
                created_at=now,
                process_id=process_id,
            )
            .returning(*D.c)
        )
        return to_record(DeliveryRecord, (await self.session.execute(stmt)).one())

    async def claim_due_deliveries(
        self, now: datetime, limit: int, lease_until: datetime
    ) -> list[DeliveryRecord]:
        """Lease up to `limit` due deliveries until `lease_until` (attempts + 1).

        A lease moves `next_attempt_at` forward, so no other node picks the delivery up
        while it is being sent; if the sender dies, the lease expires and it is retried.
        """
        due = and_(D.c.status == PENDING, D.c.next_attempt_at <= now)
        candidates = select(D.c.id).where(due).order_by(D.c.next_attempt_at, D.c.id).limit(limit)
        ids = await self.lock_candidates(candidates)
        if not ids:
            return []
        stmt = (
            update(D)
            .where(D.c.id.in_(ids), due)
            .values(next_attempt_at=lease_until, attempts=D.c.attempts + 1)
            .returning(*D.c)
        )
        rows = [to_record(DeliveryRecord, r) for r in await self.session.execute(stmt)]
        return sorted(rows, key=lambda r: r.id)

    async def mark_delivered(self, delivery_id: int, now: datetime) -> None:
        """Record a successful delivery."""
        stmt = update(D).where(D.c.id == delivery_id).values(status=DELIVERED, delivered_at=now)
        await self.session.execute(stmt)

    async def mark_failed(
        self, delivery_id: int, error: str, retry_at: datetime | None = None
    ) -> None:
        """Record a failed attempt: retry at `retry_at`, or give up (status failed) if None."""
        values: dict[str, Any] = {"last_error": error[:2000]}
        if retry_at is None:
            values["status"] = FAILED
        else:
            values["next_attempt_at"] = retry_at
        await self.session.execute(update(D).where(D.c.id == delivery_id).values(**values))

    async def requeue(self, delivery_id: int, now: datetime) -> bool:
        """A failed delivery again, due now with no attempt made (an operator's retry of its
        incident); True when it was failed."""
        stmt = (
            update(D)
            .where(D.c.id == delivery_id, D.c.status == FAILED)
            .values(status=PENDING, attempts=0, next_attempt_at=now)
        )
        return bool((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def delivery(self, delivery_id: int) -> DeliveryRecord | None:
        """One delivery by id, or None."""
        row = (await self.session.execute(select(D).where(D.c.id == delivery_id))).one_or_none()
        return None if row is None else to_record(DeliveryRecord, row)
