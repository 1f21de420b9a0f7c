"""Registries and governance services (DESIGN §6): deploy, modules, roles, keys; reads.

Every change here is a signed event on the namespace's registry process
(`customer/retail` -> `customer-retail-registry`, `action.workflow =
"customer/retail/bootstrap"`), applied by `act`. Pass `actor` as an actor id for a
server-attested event (signed by the node key) or as a `KeyPair` for a client-signed one
(the CLI's `deploy`). Reads return `DeployedWorkflow`s; `system/bootstrap` is the only
bootstrap that is ever listed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from stateward.domain.access import ADMIN_ROLE
from stateward.domain.bootstrap import bootstrap_definition, bootstrap_path
from stateward.domain.definition import validate_definition
from stateward.domain.errors import InvalidDefinition
from stateward.domain.model import Definition
from stateward.domain.paths import (
    SYSTEM_NAMESPACE,
    is_canonical_path,
    is_namespace,
    registry_id,
    split_path,
)
from stateward.domain.registry import NODE_ACTIONS
from stateward.domain.versionhash import definition_order, ordered_hash
from stateward.governance.keys import KeyPair
from stateward.runtime.core.act import ActResult, act
from stateward.runtime.core.commands import attest, sign_as
from stateward.runtime.core.services import Runtime

Signer = str | KeyPair
SYSTEM_BOOTSTRAP = bootstrap_path(SYSTEM_NAMESPACE)


@dataclass(frozen=True)
class DeployedWorkflow:
    """One version of a deployed workflow, with its definition ready to run or show."""

    path: str
    namespace: str
    name: str
    version: int
    latest_version: int
    hash: str
    definition: Definition
    created_at: datetime | None = None
    removed: bool = False


async def governance(
    runtime: Runtime, actor: Signer, namespace: str, action: str, input: Mapping[str, Any]
) -> ActResult:
    """Apply one governance `action` to `namespace`'s registry (created on first use)."""
    process, workflow = registry_id(namespace), bootstrap_path(namespace)
    if isinstance(actor, KeyPair):
        signed = sign_as(runtime, actor, process, action, workflow, input)
        result = await act(runtime, signed, attested=False)
    else:
        signed = attest(runtime, actor, process, action, workflow, input)
        result = await act(runtime, signed, attested=True)
    if action in NODE_ACTIONS:
        await runtime.refresh_trusted()
    return result


def _namespace_of(definition: Mapping[str, Any]) -> str:
    """The namespace a definition deploys into; INVALID_DEFINITION when `$path` is bad."""
    path = definition.get("$path") if isinstance(definition, Mapping) else None
    if not is_canonical_path(path) or not is_namespace(split_path(str(path))[0]):
        report = validate_definition(definition)
        raise InvalidDefinition(report.errors or ())
    return split_path(str(path))[0]


async def deploy_workflow(
    runtime: Runtime, actor: Signer, definition: Mapping[str, Any], target: str | None = None
) -> ActResult:
    """`add_workflow`: version 1 of a new path (fails when the path exists)."""
    input: dict[str, Any] = {"definition": dict(definition), "order": definition_order(definition)}
    if target is not None:
        input["target"] = target
    return await governance(runtime, actor, _namespace_of(definition), "add_workflow", input)


async def update_workflow(
    runtime: Runtime, actor: Signer, definition: Mapping[str, Any], target: str | None = None
) -> ActResult:
    """`update_workflow`: the next version of an existing path."""
    input: dict[str, Any] = {"definition": dict(definition), "order": definition_order(definition)}
    if target is not None:
        input["target"] = target
    return await governance(runtime, actor, _namespace_of(definition), "update_workflow", input)


async def unchanged_latest(
    runtime: Runtime, actor: str, definition: Mapping[str, Any]
) -> DeployedWorkflow | None:
    """The latest version of the definition's path when the definition hashes the same
    (the order-keeping hash, also for a legacy version: computed from its stored text)
    and `actor` is an admin there (an `updateWorkflow` that changes nothing is a no-op
    returning it); None otherwise (the update goes through the registry as usual)."""
    path = definition.get("$path")
    if not is_canonical_path(path):
        return None
    current = await get_workflow(runtime, str(path))
    if current is None or current.definition.hash != ordered_hash(definition):
        return None
    roles = await roles_of(runtime, actor, current.namespace)
    return current if ADMIN_ROLE in roles else None


async def remove_workflow(runtime: Runtime, actor: Signer, path: str) -> ActResult:
    """`remove_workflow`: hide a path (versions stay; running instances keep their pin)."""
    return await governance(runtime, actor, split_path(path)[0], "remove_workflow", {"path": path})


async def add_module(
    runtime: Runtime, actor: Signer, namespace: str, name: str, source: str
) -> ActResult:
    """`add_module`: a new Starlark module of `namespace` (hooks `name:function`)."""
    input = {"name": name, "source": source}
    return await governance(runtime, actor, namespace, "add_module", input)


async def update_module(
    runtime: Runtime, actor: Signer, namespace: str, name: str, source: str
) -> ActResult:
    """`update_module`: the next version of an existing module."""
    input = {"name": name, "source": source}
    return await governance(runtime, actor, namespace, "update_module", input)


async def grant_role(
    runtime: Runtime, actor: Signer, namespace: str, member: str, roles: Sequence[str]
) -> ActResult:
    """`grant_role`: `member` holds `roles` in `namespace` (and every namespace below)."""
    input = {"actor": member, "roles": list(roles)}
    return await governance(runtime, actor, namespace, "grant_role", input)


async def revoke_role(
    runtime: Runtime, actor: Signer, namespace: str, member: str, roles: Sequence[str]
) -> ActResult:
    """`revoke_role`: take `roles` in `namespace` from `member`."""
    input = {"actor": member, "roles": list(roles)}
    return await governance(runtime, actor, namespace, "revoke_role", input)


async def set_webhook(
    runtime: Runtime,
    actor: Signer,
    namespace: str,
    url: str | None,
    secret: str | None = None,
    workflow: str | None = None,
    surface: str | None = None,
) -> ActResult:
    """`set_webhook`: the URL SLA breaches of `namespace` are posted to (None removes it);
    with `workflow` (a path of `namespace`), that workflow's own webhook, used before the
    namespace's for its breaches; with `surface`, the webhook delegated stages of that
    surface (in `namespace` and below) are posted to, with their callback tokens."""
    input: dict[str, Any] = {"url": url}
    if secret is not None:
        input["secret"] = secret
    if workflow is not None:
        input["workflow"] = workflow
    if surface is not None:
        input["surface"] = surface
    return await governance(runtime, actor, namespace, "set_webhook", input)


async def rotate_key(runtime: Runtime, actor: Signer, new_key: str) -> ActResult:
    """`rotate_key` (system registry): the signer's grants move to `new_key`; the old key
    is refused for events stamped after the rotation."""
    return await governance(runtime, actor, SYSTEM_NAMESPACE, "rotate_key", {"new_key": new_key})


async def trust_node(runtime: Runtime, actor: Signer, key: str) -> ActResult:
    """`trust_node` (system registry, admin): `key` may attest events from now on."""
    return await governance(runtime, actor, SYSTEM_NAMESPACE, "trust_node", {"key": key})


async def distrust_node(runtime: Runtime, actor: Signer, key: str) -> ActResult:
    """`distrust_node` (system registry, admin): events `key` attests from now on fail."""
    return await governance(runtime, actor, SYSTEM_NAMESPACE, "distrust_node", {"key": key})


async def revoke_key(runtime: Runtime, actor: Signer, key: str) -> ActResult:
    """`revoke_key` (system registry, admin): events signed by `key` after now are refused."""
    return await governance(runtime, actor, SYSTEM_NAMESPACE, "revoke_key", {"key": key})


def _bootstrap_view() -> DeployedWorkflow:
    definition = bootstrap_definition(SYSTEM_NAMESPACE)
    return DeployedWorkflow(
        path=SYSTEM_BOOTSTRAP,
        namespace=SYSTEM_NAMESPACE,
        name="bootstrap",
        version=1,
        latest_version=1,
        hash=definition.hash,
        definition=definition,
    )


async def get_workflow(
    runtime: Runtime, path: str, version: int | None = None
) -> DeployedWorkflow | None:
    """Version `version` of `path` (the latest when None); None when unknown or removed
    (a named version of a removed path is still returned: instances pin it)."""
    if path == SYSTEM_BOOTSTRAP:
        return _bootstrap_view() if version in (None, 1) else None
    async with runtime.uow(readonly=True) as uow:
        current = await uow.workflows.get(path)
        if current is None or (current.removed and version is None):
            return None
        record = await uow.workflows.version(path, version)
    if record is None:
        return None
    return DeployedWorkflow(
        path=path,
        namespace=current.namespace,
        name=current.name,
        version=record.version,
        latest_version=current.latest_version,
        hash=record.hash,
        definition=runtime.definitions.from_record(record),
        created_at=record.created_at,
        removed=current.removed,
    )


async def list_workflows(runtime: Runtime, namespace: str | None = None) -> list[DeployedWorkflow]:
    """The latest version of every live workflow of `namespace` (all when None), by path."""
    async with runtime.uow(readonly=True) as uow:
        current = await uow.workflows.in_namespace(namespace)
        records = await uow.workflows.versions_by_keys(
            [(w.path, w.latest_version) for w in current]
        )
    found = [
        DeployedWorkflow(
            path=w.path,
            namespace=w.namespace,
            name=w.name,
            version=w.latest_version,
            latest_version=w.latest_version,
            hash=records[(w.path, w.latest_version)].hash,
            definition=runtime.definitions.from_record(records[(w.path, w.latest_version)]),
            created_at=records[(w.path, w.latest_version)].created_at,
        )
        for w in current
        if (w.path, w.latest_version) in records
    ]
    if namespace in (None, SYSTEM_NAMESPACE):
        found.append(_bootstrap_view())
        found.sort(key=lambda w: w.path)
    return found


async def roles_of(runtime: Runtime, actor: str, namespace: str) -> frozenset[str]:
    """The roles `actor` holds in `namespace` (grants of system and every prefix)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.grants.roles_of(actor, namespace)


async def list_namespaces(runtime: Runtime) -> list[str]:
    """Every namespace that has a registry, sorted (`system` once initialized)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.processes.registry_namespaces()
