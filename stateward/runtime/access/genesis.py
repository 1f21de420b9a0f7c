"""`init`: the schema and the system registry's genesis event (DESIGN §6, §11).

The genesis is the first event of `system-registry`: a `grant_role` of `admin` to the
operator's key, by the `system` actor, attested by the node key. Running `init` again
changes nothing: the schema is already at head and the system registry already exists.
"""

from __future__ import annotations

from dataclasses import dataclass

from stateward.domain.errors import DomainError
from stateward.domain.model import SYSTEM_ACTOR
from stateward.domain.paths import SYSTEM_NAMESPACE, registry_id
from stateward.governance.keys import is_public_key
from stateward.runtime.access.registry import grant_role
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings

ADMIN = "admin"


@dataclass(frozen=True)
class GenesisResult:
    """What `init` did: `created` is False when the deployment already existed."""

    net: str
    created: bool
    admins: tuple[str, ...]


async def init(target: Runtime | Settings | str, operator_public_key: str) -> GenesisResult:
    """Create the schema and the genesis granting `admin` to `operator_public_key`.

    `target` is an open `Runtime`, `Settings` or a database URL (a runtime is opened and
    closed around the work). Idempotent: a second call reports `created=False`.
    """
    if not is_public_key(operator_public_key):
        raise ValueError(f"not an Ed25519 public key: {operator_public_key!r}")
    if isinstance(target, Runtime):
        return await _genesis(target, operator_public_key)
    settings = target if isinstance(target, Settings) else Settings.from_env(database_url=target)
    runtime = await Runtime.open(settings)
    try:
        return await _genesis(runtime, operator_public_key)
    finally:
        await runtime.close()


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
