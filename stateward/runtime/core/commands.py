"""Service functions for callers that hold no key: build an envelope, attest it, `act`.

A client authenticated by a bearer token gets its envelopes built and signed by the node
key on its behalf (server-attested, DESIGN §6): the log shows the actor and the node key
as signer. GraphQL resolvers, the CLI and tests call these; every one of them goes
through `act`, the one path.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from stateward.domain.bootstrap import bootstrap_path
from stateward.domain.paths import registry_id
from stateward.governance.envelope import SignedEnvelope, build_envelope
from stateward.governance.keys import KeyPair
from stateward.governance.verification import sign_envelope
from stateward.runtime.core.act import ActResult, act
from stateward.runtime.core.idempotency import derived_instance_id, derived_nonce
from stateward.runtime.core.kernel import ADVANCE, CANCEL, START
from stateward.runtime.core.services import Runtime


def attest(
    runtime: Runtime,
    actor_id: str,
    process: str,
    action: str,
    workflow: str,
    input: Mapping[str, Any] | None = None,
) -> SignedEnvelope:
    """An envelope for `actor_id`, stamped now, built and signed by the node key (its
    nonce derived from the caller's idempotency key when one is in effect)."""
    envelope = build_envelope(
        runtime.net, process, action, workflow, dict(input or {}), actor_id,
        runtime.clock.now(), derived_nonce(actor_id),
    )  # fmt: skip
    return sign_envelope(envelope, runtime.node_key)


def sign_as(
    runtime: Runtime,
    keypair: KeyPair,
    process: str,
    action: str,
    workflow: str,
    input: Mapping[str, Any] | None = None,
) -> SignedEnvelope:
    """An envelope for the key's own actor, signed by that key (client-signed)."""
    envelope = build_envelope(
        runtime.net,
        process,
        action,
        workflow,
        dict(input or {}),
        keypair.public,
        runtime.clock.now(),
    )
    return sign_envelope(envelope, keypair)


#: (deployment `net`, process id) -> workflow path. A process never changes workflow, so
#: this saves a read transaction per action (bounded: dropped whole when full).
_WORKFLOWS: dict[tuple[str, str], str] = {}
_WORKFLOWS_LIMIT = 65536


async def _workflow_of(runtime: Runtime, instance_id: str) -> str:
    """The workflow path an existing process runs (NOT_FOUND when there is none)."""
    from stateward.domain.errors import NOT_FOUND, DomainError

    key = (runtime.net, instance_id)
    cached = _WORKFLOWS.get(key)
    if cached is not None:
        return cached
    async with runtime.uow(readonly=True) as uow:
        record = await uow.processes.get(instance_id)
    if record is None:
        raise DomainError(NOT_FOUND, f"process {instance_id} does not exist")
    if len(_WORKFLOWS) >= _WORKFLOWS_LIMIT:
        _WORKFLOWS.clear()
    _WORKFLOWS[key] = record.workflow
    return record.workflow


async def start_instance(
    runtime: Runtime,
    actor: str,
    workflow: str,
    data: Mapping[str, Any] | None = None,
    id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> ActResult:
    """Start an instance of the latest version of `workflow` (id: a new UUID if None, or
    one derived from the idempotency key in effect, so a retry starts the same one).
    `metadata` (seed §3b) is recorded in the `$start` input, apart from the data."""
    process = id or derived_instance_id(actor) or str(uuid.uuid4())
    input: dict[str, Any] = {"data": dict(data or {})}
    if metadata:
        input["metadata"] = dict(metadata)
    signed = attest(runtime, actor, process, START, workflow, input)
    return await act(runtime, signed, attested=True)


async def perform_action(
    runtime: Runtime,
    actor: str,
    instance_id: str,
    action: str,
    input: Mapping[str, Any] | None = None,
) -> ActResult:
    """Perform business action `action` on an instance."""
    workflow = await _workflow_of(runtime, instance_id)
    signed = attest(runtime, actor, instance_id, action, workflow, input)
    return await act(runtime, signed, attested=True)


async def advance_instance(
    runtime: Runtime, actor: str, instance_id: str, input: Mapping[str, Any] | None = None
) -> ActResult:
    """Perform the first applicable action out of the current state (`$advance`)."""
    workflow = await _workflow_of(runtime, instance_id)
    signed = attest(runtime, actor, instance_id, ADVANCE, workflow, input)
    return await act(runtime, signed, attested=True)


async def cancel_instance(
    runtime: Runtime, actor: str, instance_id: str, reason: str | None = None
) -> ActResult:
    """Cancel a live instance (an admin or the actor who started it)."""
    workflow = await _workflow_of(runtime, instance_id)
    input = {"reason": reason} if reason else {}
    signed = attest(runtime, actor, instance_id, CANCEL, workflow, input)
    return await act(runtime, signed, attested=True)


def registry_envelope_target(namespace: str) -> tuple[str, str]:
    """(process id, action.workflow) of a namespace's registry events."""
    return registry_id(namespace), bootstrap_path(namespace)
