"""Namespace webhooks (DESIGN §7): HMAC-signed POSTs with retries and backoff.

A delivery is queued (`enqueue`) inside the transaction of the event that causes it (an
SLA breach), so it exists exactly when the event does. `deliver_due` (run by the ticker)
leases due deliveries — the lease moves `next_attempt_at` forward so no other node sends
the same one meanwhile — POSTs the JSON body with
`X-Stateward-Signature: sha256=<hex HMAC-SHA256(secret, body)>` and records the outcome:
`delivered`, or another attempt after an exponential backoff, or `failed` after
`MAX_ATTEMPTS`. Every attempt is visible (`attempts`, `last_error`, `status`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx

from stateward.domain.canonical import canonical_bytes
from stateward.domain.registry import webhook_scope
from stateward.persistence import UnitOfWork
from stateward.persistence.access import namespace_scopes
from stateward.records import DeliveryRecord
from stateward.runtime.core.ops_support import kernel_repo
from stateward.runtime.core.services import Runtime

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Stateward-Signature"
EVENT_HEADER = "X-Stateward-Event"
DELIVERY_HEADER = "X-Stateward-Delivery"
MAX_ATTEMPTS = 8
BASE_DELAY_S = 2.0
MAX_DELAY_S = 3600.0
LEASE_S = 60.0
TIMEOUT_S = 5.0
BATCH = 20


@dataclass(frozen=True)
class Attempt:
    """The result of one delivery attempt."""

    delivery_id: int
    ok: bool
    status_code: int | None
    error: str | None


def sign_body(secret: str, body: bytes) -> str:
    """The signature header value: `sha256=<hex HMAC-SHA256(secret, body)>`."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def backoff_seconds(attempts: int) -> float:
    """Delay before the next attempt after `attempts` failed ones: 2, 4, 8, … ≤ 1 h."""
    return float(min(MAX_DELAY_S, BASE_DELAY_S * 2 ** max(0, attempts - 1)))


async def enqueue(
    uow: UnitOfWork,
    namespace: str,
    event_type: str,
    payload: Mapping[str, Any],
    now: datetime,
    *,
    workflow: str | None = None,
) -> DeliveryRecord | None:
    """Queue a POST of `payload` to the webhook of `workflow` when it has its own (issue 13),
    else of `namespace` (or of the nearest namespace above it that has one); None when there
    is no webhook. The delivery's scope (and the secret that signs it) is the webhook's."""
    scopes = list(reversed(namespace_scopes(namespace)))
    if workflow is not None:
        scopes.insert(0, webhook_scope(workflow))
    for scope in scopes:
        hook = await uow.webhooks.get(scope)
        if hook is not None and hook.url:
            body = canonical_bytes(dict(payload)).decode("utf-8")
            return await uow.webhooks.enqueue(scope, hook.url, event_type, body, now)
    return None


async def deliver_due(
    runtime: Runtime,
    now: datetime | None = None,
    *,
    client: httpx.AsyncClient | None = None,
    limit: int = BATCH,
) -> list[Attempt]:
    """Send the deliveries due at `now` (leased first), record each outcome; returns the
    attempts made. Never raises for a failing receiver."""
    now = now or runtime.clock.now()
    async with runtime.uow() as uow:
        due = await uow.webhooks.claim_due_deliveries(now, limit, now + timedelta(seconds=LEASE_S))
        secrets = {d.namespace: await _secret(uow, d.namespace) for d in due}
        await uow.commit()
    if not due:
        return []
    own = client is None
    http = client or httpx.AsyncClient(timeout=TIMEOUT_S)
    try:
        attempts = [await _send(http, d, secrets.get(d.namespace)) for d in due]
    finally:
        if own:
            await http.aclose()
    async with runtime.uow() as uow:
        for delivery, attempt in zip(due, attempts, strict=True):
            await _record(uow, delivery, attempt, now)
        await uow.commit()
    return attempts


async def _secret(uow: UnitOfWork, namespace: str) -> str | None:
    hook = await uow.webhooks.get(namespace)
    return None if hook is None else hook.secret


async def _send(http: httpx.AsyncClient, delivery: DeliveryRecord, secret: str | None) -> Attempt:
    body = delivery.body.encode("utf-8")
    headers = {
        "Content-Type": "application/json",
        EVENT_HEADER: delivery.event_type,
        DELIVERY_HEADER: str(delivery.id),
    }
    if secret:
        headers[SIGNATURE_HEADER] = sign_body(secret, body)
    try:
        response = await http.post(delivery.url, content=body, headers=headers)
    except httpx.HTTPError as error:
        return Attempt(delivery.id, False, None, f"{type(error).__name__}: {error}")
    if 200 <= response.status_code < 300:
        return Attempt(delivery.id, True, response.status_code, None)
    return Attempt(delivery.id, False, response.status_code, f"HTTP {response.status_code}")


async def _record(
    uow: UnitOfWork, delivery: DeliveryRecord, attempt: Attempt, now: datetime
) -> None:
    if attempt.ok:
        await uow.webhooks.mark_delivered(delivery.id, now)
        return
    error = attempt.error or "failed"
    if delivery.attempts >= MAX_ATTEMPTS:
        log.warning("webhook delivery %s failed for good: %s", delivery.id, error)
        await uow.webhooks.mark_failed(delivery.id, error, None)
        return
    retry_at = now + timedelta(seconds=backoff_seconds(delivery.attempts))
    await uow.webhooks.mark_failed(delivery.id, error, retry_at)


async def list_deliveries(
    runtime: Runtime, namespace: str | None = None, limit: int = 100, *,
    status: str | None = None, before_id: int | None = None,
) -> list[DeliveryRecord]:  # fmt: skip
    """Webhook deliveries with their attempts, last error and status, newest first
    (of one namespace / status when given; older than `before_id` when given)."""
    async with runtime.uow(readonly=True) as uow:
        return await kernel_repo(uow).deliveries(
            namespace, limit=limit, status=status, before_id=before_id
        )
