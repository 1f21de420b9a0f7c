"""Cross-namespace grants as registry events: `allow_spawn` / `share_module` (issue 10).

The checks live in `runtime.core.references`; this module signs the grants (the
GraphQL mutations `allowSpawn`, `shareModule` and their withdrawals) and, for deployment
tools acting with one key, the grants a definition still needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stateward.domain.errors import DomainError
from stateward.domain.paths import split_path
from stateward.runtime.access.registry import Signer, governance
from stateward.runtime.core.act import ActResult
from stateward.runtime.core.references import foreign_references, may_use_module, spawn_granted
from stateward.runtime.core.services import Runtime


async def allow_spawn(
    runtime: Runtime, actor: Signer, namespace: str, consumer: str, allow: bool = True
) -> ActResult:
    """`allow_spawn` (or `disallow_spawn`) on `namespace`'s registry naming `consumer`."""
    action = "allow_spawn" if allow else "disallow_spawn"
    return await governance(runtime, actor, namespace, action, {"namespace": consumer})


async def share_module(
    runtime: Runtime, actor: Signer, namespace: str, name: str, consumer: str, share: bool = True
) -> ActResult:
    """`share_module` (or `unshare_module`) of module `name` of `namespace` with `consumer`."""
    action = "share_module" if share else "unshare_module"
    return await governance(
        runtime, actor, namespace, action, {"name": name, "namespace": consumer}
    )


async def grant_references(runtime: Runtime, actor: Signer, definition: Mapping[str, Any]) -> int:
    """For a deployment tool acting with one key (`stateward deploy`, the demo): sign the
    `allow_spawn` / `share_module` events the definition needs, in each target namespace,
    when they are missing — they succeed only where the key is admin, so nothing is
    assumed; elsewhere the deployment then fails with UNRESOLVED_SPAWN / UNRESOLVED_HOOK.
    Returns how many grants were made."""
    path = definition.get("$path")
    if not isinstance(path, str) or "/" not in path:
        return 0
    own = split_path(path)[0]
    spawns, hooks = foreign_references(definition)
    made = 0
    for namespace in sorted(spawns):
        async with runtime.uow(readonly=True) as uow:
            granted = await spawn_granted(uow, own, namespace)
        if not granted and await _try(allow_spawn(runtime, actor, namespace, own)):
            made += 1
    for namespace, name in sorted(hooks):
        async with runtime.uow(readonly=True) as uow:
            granted = await may_use_module(uow, own, namespace, name)
        if not granted and await _try(share_module(runtime, actor, namespace, name, own)):
            made += 1
    return made


async def _try(call: Any) -> bool:
    """Await a grant; False when it was refused (not admin there, module missing, ...)."""
    try:
        await call
    except DomainError:
        return False
    return True
