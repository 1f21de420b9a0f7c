"""Webhook deliveries of a namespace: every attempt's outcome, visible to its admins.

A delivery is one POST of one event (an SLA breach) to the namespace's webhook, retried
with backoff until delivered or failed for good (`runtime/webhooks.py`). The webhook's
secret is never part of any type.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import strawberry

from stateward.records import DeliveryRecord
from stateward.schema.enums import WebhookDeliveryStatus
from stateward.schema.scalars import JSON


def _payload(body: str) -> Any:
    """The posted body; a delegated stage's callback token is a credential for the surface
    only, so it is shown redacted (its expiry stays)."""
    try:
        value = json.loads(body)
    except ValueError:
        return body
    callback = value.get("callback") if isinstance(value, dict) else None
    if isinstance(callback, dict) and "token" in callback:
        value["callback"] = {**callback, "token": "[redacted]"}
    return value


@strawberry.type
class WebhookDelivery:
    """One webhook delivery: where it goes, what it carries, and how its attempts went."""

    id: int = strawberry.field(description="The delivery id (the `X-Stateward-Delivery` header).")
    namespace: str = strawberry.field(description="The namespace whose webhook it targets.")
    url: str
    event_type: str
    payload: JSON = strawberry.field(
        description="The JSON body that is (or was) posted (a delegated stage's callback "
        "token shown as `[redacted]`)."
    )
    status: WebhookDeliveryStatus = strawberry.field(description="Where the delivery is.")
    attempts: int
    last_error: str | None
    next_attempt_at: datetime | None = strawberry.field(
        description="When the next attempt is due (null once delivered or failed)."
    )
    created_at: datetime
    delivered_at: datetime | None

    @classmethod
    def from_record(cls, record: DeliveryRecord) -> WebhookDelivery:
        """The delivery row `record`."""
        pending = record.status == "pending"
        return cls(
            id=record.id, namespace=record.namespace, url=record.url,
            event_type=record.event_type, payload=_payload(record.body),
            status=WebhookDeliveryStatus(record.status),
            attempts=record.attempts, last_error=record.last_error,
            next_attempt_at=record.next_attempt_at if pending else None,
            created_at=record.created_at, delivered_at=record.delivered_at,
        )  # fmt: skip
