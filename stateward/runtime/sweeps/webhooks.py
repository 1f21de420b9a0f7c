"""Namespace webhooks (DESIGN §7): HMAC-signed POSTs with retries and backoff.

A delivery is queued (`enqueue`) inside the transaction of the event that causes it (an
SLA breach), so it exists exactly when the event does. `deliver_due` (run by the ticker)
leases due deliveries — the lease moves `next_attempt_at` forward so no other node sends
the same one meanwhile — POSTs the JSON body with
`X-Stateward-Signature: sha256=<hex HMAC-SHA256(secret, body)>` and records the outcome:
`delivered`, or another attempt after an exponential backoff, or `failed` after
`MAX_ATTEMPTS`. Every attempt is visible (`attempts`, `last_error`, `status`).

A delivery queued by an instance's event (`process_id`) that exhausts its retries is an
incident of that instance (issue 15): its end is recorded by a row-only
`$webhook {delivery, outcome: exhausted, event, attempts, error}` event through `act`,
whose transaction marks the delivery failed and opens the WEBHOOK_EXHAUSTED incident.
`retryIncident` re-queues it (`$retry {delivery}`: attempts 0, due now); when a delivery
with an open incident succeeds, `$webhook {delivery, outcome: delivered}` marks it
delivered and resolves the incident. Deliveries without an instance (queued before
revision 0015) keep the plain `failed` row.
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
from stateward.domain.errors import CONFLICT, INVALID_INPUT, NOT_FOUND, DomainError
from stateward.domain.incidents import WEBHOOK
from stateward.domain.model import Outcome
from stateward.domain.registry import webhook_scope
from stateward.persistence import UnitOfWork
from stateward.persistence.access import namespace_scopes
from stateward.persistence.notify import PENDING
from stateward.persistence.retry import retry_transient
from stateward.records import DeliveryRecord
from stateward.runtime.core.kernel import ActContext, apply_engine
from stateward.runtime.core.ops_support import (
    kernel_repo,
    require_instance,
    require_system,
    system_act,
)
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
    process_id: str | None = None,
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
            return await uow.webhooks.enqueue(
                scope, hook.url, event_type, body, now, process_id=process_id
            )
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

    async def claim() -> tuple[list[DeliveryRecord], dict[str, Any], set[int], dict[str, str]]:
        async with runtime.uow() as uow:
            lease = now + timedelta(seconds=LEASE_S)
            due = await uow.webhooks.claim_due_deliveries(now, limit, lease)
            secrets = {d.namespace: await _secret(uow, d.namespace) for d in due}
            watched = await uow.incidents.deliveries_with_open_incidents([d.id for d in due])
            owners = await uow.processes.processes_by_ids(d.process_id for d in due if d.process_id)
            await uow.commit()
        return due, secrets, watched, {pid: p.workflow for pid, p in owners.items()}

    # A transient fault (PostgreSQL ends a writing transaction idle for 1 s, e.g. on a
    # descheduled node) runs the claim again: nothing was claimed, or its lease holds the
    # rows until it ends. The outcomes are absolute values: writing them twice is the same.
    due, secrets, watched, workflows = await retry_transient(claim, what="webhook claim")
    if not due:
        return []
    own = client is None
    http = client or httpx.AsyncClient(timeout=TIMEOUT_S)
    try:
        attempts = [await _send(http, d, secrets.get(d.namespace)) for d in due]
    finally:
        if own:
            await http.aclose()
    events = [
        (delivery, attempt, workflow)
        for delivery, attempt in zip(due, attempts, strict=True)
        if (workflow := workflows.get(delivery.process_id or "")) is not None
        and _is_incident_event(delivery, attempt, watched)
    ]
    by_event = {delivery.id for delivery, _, _ in events}  # recorded by their `$webhook`

    async def record() -> None:
        async with runtime.uow() as uow:
            for delivery, attempt in zip(due, attempts, strict=True):
                if delivery.id not in by_event:
                    await _record(uow, delivery, attempt, now)
            await uow.commit()

    await retry_transient(record, what="webhook outcomes")
    for delivery, attempt, workflow in events:
        await _record_event(runtime, delivery, attempt, workflow, now)
    return attempts


def _is_incident_event(delivery: DeliveryRecord, attempt: Attempt, watched: set[int]) -> bool:
    """Whether this attempt ends the delivery in a way its instance records: exhausted,
    or delivered while an incident is open for it."""
    return delivery.id in watched if attempt.ok else delivery.attempts >= MAX_ATTEMPTS


async def _record_event(
    runtime: Runtime, delivery: DeliveryRecord, attempt: Attempt, workflow: str, now: datetime
) -> None:
    """Record the delivery's end with a `$webhook` event on its instance (its transaction
    updates the delivery and the incident); the plain row update if that is refused."""
    input: dict[str, Any] = {"delivery": delivery.id, "outcome": "delivered"}
    if not attempt.ok:
        error = (attempt.error or "failed")[:500]
        input = {"delivery": delivery.id, "outcome": "exhausted", "event": delivery.event_type,
                 "attempts": delivery.attempts, "error": error}  # fmt: skip
    assert delivery.process_id is not None
    try:
        await system_act(runtime, delivery.process_id, workflow, WEBHOOK, input)
        return
    except DomainError as error:
        log.warning("webhook delivery %s: %s not recorded on %s: %s", delivery.id,
                    input["outcome"], delivery.process_id, error.message)  # fmt: skip
    async with runtime.uow() as uow:
        await _record(uow, delivery, attempt, now)
        await uow.commit()


async def op_webhook(ctx: ActContext) -> Outcome:
    """`$webhook {delivery, outcome, event?, attempts?, error?}` (system): a delivery of
    this instance exhausted its retries (marked failed) or, with an open incident, was
    delivered (marked delivered), in this one event; the incident follows (core)."""
    require_system(ctx)
    process = require_instance(ctx)
    delivery_id = ctx.input.get("delivery")
    if isinstance(delivery_id, bool) or not isinstance(delivery_id, int):
        raise DomainError(INVALID_INPUT, "delivery must be a delivery id", pointer="/delivery")
    delivery = await ctx.uow.webhooks.delivery(delivery_id)
    if delivery is None or delivery.process_id != process.id:
        raise DomainError(NOT_FOUND, f"webhook delivery {delivery_id} of {process.id} "
                          "does not exist")  # fmt: skip
    outcome = apply_engine(ctx)
    if delivery.status != PENDING:
        raise DomainError(CONFLICT, f"webhook delivery {delivery_id} is {delivery.status}")
    if ctx.input.get("outcome") == "delivered":
        await ctx.uow.webhooks.mark_delivered(delivery_id, ctx.now)
    else:
        error = ctx.input.get("error")
        await ctx.uow.webhooks.mark_failed(delivery_id, str(error or "failed"), None)
    return outcome


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
    status: str | None = None, before_id: int | None = None, newer_than: int | None = None,
) -> list[DeliveryRecord]:  # fmt: skip
    """Webhook deliveries with their attempts, last error and status, newest first
    (of one namespace / status when given; older than `before_id` when given; with
    `newer_than`, those above that id, oldest first, to page backward)."""
    async with runtime.uow(readonly=True) as uow:
        return await kernel_repo(uow).deliveries(
            namespace, limit=limit, status=status, before_id=before_id, newer_than=newer_than
        )


async def count_deliveries(
    runtime: Runtime, namespace: str | None = None, *, status: str | None = None
) -> int:
    """How many deliveries `list_deliveries` pages through (`totalCount`)."""
    async with runtime.uow(readonly=True) as uow:
        return await kernel_repo(uow).count_deliveries(namespace, status)
