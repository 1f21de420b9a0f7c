"""`init`: the schema and the system registry's genesis event (DESIGN §6, §11).

The genesis is the first event of `system-registry`: a `grant_role` of `admin` to the
operator's key, by the `system` actor, attested by the node key (the one event a verifier
accepts from a node key no `trust_node` vouched for: the log starts there). Given the
operator's key pair (not just its public key), `init` then signs `trust_node` for this
node's key with it, so the node's later attestations verify; run again on another node
with the same operator key, it trusts that node's key. Otherwise running `init` again
changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stateward.domain.errors import DomainError
from stateward.domain.model import SYSTEM_ACTOR
from stateward.domain.paths import SYSTEM_NAMESPACE, registry_id
from stateward.governance.keys import KeyPair, is_public_key
from stateward.runtime.access.registry import grant_role, trust_node
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings

ADMIN = "admin"


@dataclass(frozen=True)
class GenesisResult:
    """What `init` did: `created` is False when the deployment already existed."""

    net: str
    created: bool
    admins: tuple[str, ...]
    #: This node's key was trusted by a `trust_node` event of this call.
    node_trusted: bool = False


async def init(target: Runtime | Settings | str, operator: str | KeyPair) -> GenesisResult:
    """Create the schema and the genesis granting `admin` to the operator's key; given
    the operator's `KeyPair`, also trust this node's key (`trust_node` signed by it)
    unless the log already does and the operator is a system admin.

    `target` is an open `Runtime`, `Settings` or a database URL (a runtime is opened and
    closed around the work). Idempotent: a second call reports `created=False`.
    """
    public = operator.public if isinstance(operator, KeyPair) else operator
    if not is_public_key(public):
        raise ValueError(f"not an Ed25519 public key: {public!r}")
    if isinstance(target, Runtime):
        return await _init(target, operator)
    settings = target if isinstance(target, Settings) else Settings.from_env(database_url=target)
    runtime = await Runtime.open(settings)
    try:
        return await _init(runtime, operator)
    finally:
        await runtime.close()


async def _init(runtime: Runtime, operator: str | KeyPair) -> GenesisResult:
    public = operator.public if isinstance(operator, KeyPair) else operator
    result = await _genesis(runtime, public)
    if (
        isinstance(operator, KeyPair)
        and public in result.admins
        and not await runtime.node_trusted()
    ):
        await trust_node(runtime, operator, runtime.node_public)
        result = replace(result, node_trusted=True)
    return result


async def _genesis(runtime: Runtime, operator: str) -> GenesisResult:
    if not await _initialized(runtime):
        try:
            await grant_role(runtime, SYSTEM_ACTOR, SYSTEM_NAMESPACE, operator, [ADMIN])
        except DomainError:
            if not await _initialized(runtime):  # lost a race with another init: fine
                raise
        else:
            return GenesisResult(runtime.net, True, await _admins(runtime))
    return GenesisResult(runtime.net, False, await _admins(runtime))


async def _initialized(runtime: Runtime) -> bool:
    async with runtime.uow(readonly=True) as uow:
        return await uow.processes.get(registry_id(SYSTEM_NAMESPACE)) is not None


async def _admins(runtime: Runtime) -> tuple[str, ...]:
    async with runtime.uow(readonly=True) as uow:
        grants = await uow.grants.members(SYSTEM_NAMESPACE)
    return tuple(sorted({g.actor for g in grants if g.role == ADMIN}))
