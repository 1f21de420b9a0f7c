"""Builders of valid rows for the persistence tests (real records, fixed clock)."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta

from stateward.records import INSTANCE, ProcessRecord, StoredEvent

T0 = datetime(2026, 11, 30, 2, 21, 9, 123000, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """T0 plus `seconds`."""
    return T0 + timedelta(seconds=seconds)


def new_process(
    process_id: str | None = None,
    *,
    workflow: str = "customer/retail/onboarding",
    state: str = "intake",
    status: str = "active",
    now: datetime = T0,
    **overrides: object,
) -> ProcessRecord:
    """A fresh instance row at seq 0."""
    values: dict[str, object] = dict(
        id=process_id or str(uuid.uuid4()),
        kind=INSTANCE,
        namespace=workflow.rsplit("/", 1)[0],
        workflow=workflow,
        workflow_version=1,
        data={"state": state},
        state=state,
        status=status,
        seq=0,
        state_entered_at=now,
        last_event_at=now,
        created_at=now,
        updated_at=now,
        started_by="actor-a",
    )
    values.update(overrides)
    return ProcessRecord(**values)  # type: ignore[arg-type]


def new_event(
    process_id: str,
    seq: int,
    *,
    actor: str = "actor-a",
    nonce: str | None = None,
    action: str = "create",
    ts: datetime = T0,
    input: object = None,
    prev_hash: str | None = None,
) -> StoredEvent:
    """An event whose identity and hash are sha256 of its (fake but unique) envelope."""
    envelope = json.dumps(
        {
            "v": 1,
            "process": process_id,
            "action": {"name": action, "input": input or {}},
            "actor": actor,
            "nonce": nonce or uuid.uuid4().hex,
            "seq-salt": seq,
        },
        sort_keys=True,
    )
    identity = hashlib.sha256(envelope.encode()).hexdigest()
    return StoredEvent(
        process_id=process_id,
        seq=seq,
        identity=identity,
        action=action,
        workflow="customer/retail/onboarding",
        actor=actor,
        signer=actor,
        ts=ts,
        nonce=json.loads(envelope)["nonce"],
        input=input or {},
        envelope=envelope,
        signature="sig-" + identity[:16],
        prev_hash=prev_hash,
        hash=hashlib.sha256(((prev_hash or "") + identity).encode()).hexdigest(),
    )
