"""Publishing and delivering messages (issue 15).

`publish` records the message (idempotent by `messageId`), makes one pending delivery per
instance waiting for it — found through the `message_waits` index, never by reading
instance data — starts an instance of every workflow whose `start.message` names it, and
delivers. A delivery is a `$message` event by `system`, attested by the node key, through
`act`: it performs the waiting action with the payload as input and closes the delivery
pending -> delivered in the same transaction (conditional), so across nodes and retries
an instance gets a message once. A message with a TTL stays live: an instance entering
a state that waits for it gets a pending delivery in the event that brought it there
(`core.writes`), delivered right after that commit and, should that fail, by
`deliver_pending`, which the ticker runs on every node.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError

from stateward.domain.access import require_operation_role
from stateward.domain.canonical import canonical_bytes
from stateward.domain.errors import (
    CONFLICT,
    INVALID_INPUT,
    NOT_FOUND,
    REPLAYED,
    DomainError,
)
from stateward.domain.messages import MAX_KEY, MESSAGE_OP, valid_name
from stateward.domain.model import Outcome
from stateward.domain.paths import is_namespace
from stateward.persistence.messages import DELIVERED, NOT_APPLICABLE
from stateward.persistence.retry import retry_transient
from stateward.records import MessageDeliveryRecord, MessageRecord, ProcessRecord
from stateward.runtime.core.kernel import START, ActContext, apply_engine
from stateward.runtime.core.ops_support import (
    is_not_due,
    not_due,
    require_instance,
    require_system,
    system_act,
)
from stateward.runtime.core.services import Runtime

log = logging.getLogger(__name__)

MESSAGE = MESSAGE_OP
#: Longest time a message is kept for instances still to arrive (one year).
MAX_TTL_SECONDS = 366 * 24 * 3600
#: Largest payload (canonical JSON bytes).
MAX_PAYLOAD = 64 * 1024
MAX_MESSAGE_ID = 255
BATCH = 100
#: uuid5 namespace of instances a message starts: uuid5(ns, "<message row id>:<path>").
START_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "stateward:message-start")


@dataclass
class Publication:
    """What `publish` did: the message, whether it was a resubmission, the instances it
    was delivered to and the instances it started (process ids)."""

    message: MessageRecord
    duplicate: bool = False
    delivered: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)


async def instances(runtime: Runtime, ids: Sequence[str]) -> list[ProcessRecord]:
    """The process rows of `ids`, in that order (missing ones left out)."""
    async with runtime.uow(readonly=True) as uow:
        found = await uow.processes.processes_by_ids(ids)
    return [found[i] for i in ids if i in found]


async def op_message(ctx: ActContext) -> Outcome:
    """`$message {delivery, message, name, key, action, input}` (system): perform the
    waiting action with the payload and close the delivery, in this one event."""
    require_system(ctx)
    process = require_instance(ctx)
    delivery_id = ctx.input.get("delivery")
    if not isinstance(delivery_id, int) or isinstance(delivery_id, bool):
        raise DomainError(INVALID_INPUT, "$message needs the delivery id", pointer="/delivery")
    repo = ctx.uow.messages
    delivery = await repo.delivery(delivery_id)
    if delivery is None or delivery.process_id != process.id:
        raise DomainError(NOT_FOUND, f"delivery {delivery_id} of {process.id} does not exist")
    if delivery.status != "pending":
        raise not_due(f"delivery {delivery_id} is {delivery.status}")
    if ctx.input.get("action") != delivery.action:
        raise DomainError(INVALID_INPUT, f"delivery {delivery_id} performs {delivery.action!r}",
                          pointer="/action")  # fmt: skip
    outcome = apply_engine(ctx)
    if not await repo.close(delivery_id, DELIVERED, ctx.now, ctx.runtime.node_public):
        raise not_due(f"delivery {delivery_id} delivered concurrently")
    return outcome


async def may_publish(runtime: Runtime, actor: str, namespace: str) -> None:
    """FORBIDDEN unless `actor` holds `admin` or `operator` in `namespace` (or above);
    NOT_FOUND when it holds no role there at all (nothing about the namespace leaks)."""
    async with runtime.uow(readonly=True) as uow:
        roles = await uow.grants.roles_of(actor, namespace)
    require_operation_role(roles, f"publishing a message into {namespace}")


def _check(
    namespace: str, name: str, key: str, payload: Any, ttl: int, message_id: str | None
) -> dict[str, Any]:
    if not is_namespace(namespace):
        raise DomainError(INVALID_INPUT, f"{namespace!r} is not a namespace", pointer="/namespace")
    if not valid_name(name):
        raise DomainError(
            INVALID_INPUT,
            "a message name is letters, digits and '_ . : -' (at most 128)",
            pointer="/name",
        )
    if not isinstance(key, str) or not key or len(key) > MAX_KEY:
        raise DomainError(INVALID_INPUT, f"correlationKey must be 1..{MAX_KEY} characters",
                          pointer="/correlationKey")  # fmt: skip
    if payload is None:
        payload = {}
    if not isinstance(payload, Mapping):
        raise DomainError(INVALID_INPUT, "payload must be a JSON object", pointer="/payload")
    if len(canonical_bytes(dict(payload))) > MAX_PAYLOAD:
        raise DomainError(INVALID_INPUT, f"payload is larger than {MAX_PAYLOAD} bytes",
                          pointer="/payload")  # fmt: skip
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= MAX_TTL_SECONDS:
        raise DomainError(INVALID_INPUT, f"ttlSeconds must be 0..{MAX_TTL_SECONDS}",
                          pointer="/ttlSeconds")  # fmt: skip
    if message_id is not None and (not message_id or len(message_id) > MAX_MESSAGE_ID):
        raise DomainError(INVALID_INPUT, f"messageId must be 1..{MAX_MESSAGE_ID} characters",
                          pointer="/messageId")  # fmt: skip
    return dict(payload)


async def publish(
    runtime: Runtime,
    actor: str,
    namespace: str,
    name: str,
    key: str,
    payload: Any = None,
    *,
    ttl_seconds: int = 0,
    message_id: str | None = None,
) -> Publication:
    """Publish message `name` with correlation `key` in `namespace` (see the module
    docstring). The same `message_id` again answers the first publication
    (`duplicate`), REPLAYED when it carried something else."""
    body = _check(namespace, name, key, payload, ttl_seconds, message_id)
    await may_publish(runtime, actor, namespace)
    now = runtime.clock.now()
    ident = message_id or str(uuid.uuid4())
    values = {
        "namespace": namespace, "name": name, "correlation_key": key, "message_id": ident,
        "payload": body, "publisher": actor, "published_at": now,
        "expires_at": now + timedelta(seconds=ttl_seconds),
    }  # fmt: skip
    attempts = 0

    async def store() -> tuple[MessageRecord | None, MessageRecord | None]:
        """(the earlier publication of `ident`, else None; the new message, else None)."""
        nonlocal attempts
        attempts += 1
        async with runtime.uow() as uow:
            found = await uow.messages.find(namespace, name, ident)
            if found is not None:
                return found, None
            added = await uow.messages.add(**values)
            targets = await uow.messages.waiting(namespace, name, key)
            await uow.messages.add_deliveries(added.id, targets, now)
            await uow.commit()
            return None, added

    try:
        # a transient fault (the connection ended, e.g. by the idle-in-transaction bound
        # while this node was descheduled) is retried like every other write
        existing, message = await retry_transient(store, what="publish message")
        if existing is not None and message_id is None and attempts > 1:
            # our own first attempt committed before its connection was lost
            existing, message = None, existing
    except IntegrityError:  # the same messageId published concurrently
        async with runtime.uow(readonly=True) as uow:
            existing = await uow.messages.find(namespace, name, ident)
        if existing is None:
            raise
    if existing is not None:
        if (existing.correlation_key, existing.payload) != (key, body):
            raise DomainError(REPLAYED, f"messageId {ident!r} was published with other content",
                              pointer="/messageId")  # fmt: skip
        return await _finish(runtime, existing, duplicate=True)
    assert message is not None
    return await _finish(runtime, message, duplicate=False)


async def _finish(runtime: Runtime, message: MessageRecord, *, duplicate: bool) -> Publication:
    """Start what the message starts and deliver its pending deliveries (a resubmission
    finishes whatever the first attempt left undone)."""
    result = Publication(message=message, duplicate=duplicate)
    result.started = await _start_workflows(runtime, message)
    async with runtime.uow(readonly=True) as uow:
        deliveries = await uow.messages.deliveries_of(message.id)
    for delivery in deliveries:
        if delivery.status == "pending":
            await _deliver(runtime, delivery, message)
    async with runtime.uow(readonly=True) as uow:
        done = await uow.messages.deliveries_of(message.id)
    result.delivered = [d.process_id for d in done if d.status == DELIVERED]
    return result


async def _start_workflows(runtime: Runtime, message: MessageRecord) -> list[str]:
    """An instance of every workflow of the namespace (or below) whose `start.message`
    is this message, with the payload as data; its id is derived from the message, so a
    retry starts nothing twice."""
    async with runtime.uow(readonly=True) as uow:
        workflows = [
            w for w in await uow.workflows.in_namespace()
            if w.namespace == message.namespace
            or w.namespace.startswith(message.namespace + "/")
            or message.namespace == "system"
        ]  # fmt: skip
        starting = []
        for w in workflows:
            definition = await runtime.definition(uow, w.path)
            if definition.start_message == message.name:
                starting.append(w.path)
    started = []
    for path in starting:
        pid = str(uuid.uuid5(START_NAMESPACE, f"{message.id}:{path}"))
        try:
            await system_act(runtime, pid, path, START, {"data": dict(message.payload)})
        except DomainError as error:
            if error.code != CONFLICT:  # CONFLICT: started by an earlier attempt
                log.warning("message %s did not start %s: %s", message.id, path, error.message)
                continue
        started.append(pid)
    return started


async def _deliver(
    runtime: Runtime, delivery: MessageDeliveryRecord, message: MessageRecord
) -> str:
    """Append the `$message` event of one delivery: DELIVERED, NOT_APPLICABLE (the
    instance moved on, a guard failed...: recorded with the reason) or '' (skipped)."""
    async with runtime.uow(readonly=True) as uow:
        process = await uow.processes.get(delivery.process_id)
    if process is None:
        return await _not_applicable(runtime, delivery, "NOT_FOUND: the process is gone")
    input = {
        "delivery": delivery.id, "message": message.message_id, "name": message.name,
        "key": message.correlation_key, "action": delivery.action,
        "input": dict(message.payload),
    }  # fmt: skip
    try:
        await system_act(runtime, process.id, process.workflow, MESSAGE, input)
    except DomainError as error:
        if is_not_due(error):
            return ""
        if error.code == CONFLICT:
            log.warning("message delivery %s not done: %s", delivery.id, error.message)
            return ""
        return await _not_applicable(runtime, delivery, f"{error.code}: {error.message}")
    return DELIVERED


async def _not_applicable(runtime: Runtime, delivery: MessageDeliveryRecord, why: str) -> str:
    async with runtime.uow() as uow:
        won = await uow.messages.close(
            delivery.id, NOT_APPLICABLE, runtime.clock.now(), runtime.node_public, why[:2000]
        )
        await uow.commit()
    return NOT_APPLICABLE if won else ""


async def deliver(runtime: Runtime, delivery_ids: Sequence[int]) -> list[int]:
    """Deliver these pending deliveries (after the commit that made them); returns the
    ids delivered by this call."""
    done = []
    for delivery_id in delivery_ids:
        async with runtime.uow(readonly=True) as uow:
            delivery = await uow.messages.delivery(delivery_id)
            message = await uow.messages.get(delivery.message_ref) if delivery else None
        if delivery is None or message is None or delivery.status != "pending":
            continue
        if await _deliver(runtime, delivery, message) == DELIVERED:
            done.append(delivery_id)
    return done


async def deliver_pending(runtime: Runtime, now: datetime | None = None) -> list[int]:
    """The sweep: deliver every pending delivery (left by a crash or a failed hook);
    returns the ids THIS call delivered. Safe on several nodes at once."""
    del now  # deliveries are due at once; the signature matches the other sweeps
    done: list[int] = []
    after = 0
    while True:
        async with runtime.uow(readonly=True) as uow:
            page = await uow.messages.pending(BATCH, after)
        if not page:
            return done
        done.extend(await deliver(runtime, [d.id for d in page]))
        after = page[-1].id
