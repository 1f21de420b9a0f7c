"""Cross-namespace references are granted, not assumed (issue 10).

A workflow of namespace C may spawn instances of a workflow of namespace T, or name a
hook module of T, when T is C or below it (C's admins govern T too), or when T — its
registry or the registry of a namespace above it — granted it through a signed registry
event: `allow_spawn {namespace: C}` / `share_module {name, namespace: C}` (a grant to C
covers the namespaces below C). The grants live in the registries' process data (so
`verify` replays them) and are checked when a workflow is deployed and again when the
spawn or the hook runs. A workflow a namespace may not reference is answered like one
that does not exist (UNRESOLVED_SPAWN / UNRESOLVED_HOOK at deploy, NOT_FOUND or
HOOK_NOT_FOUND at run time), so nothing tells whether it exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from stateward.domain.paths import registry_id, resolve_hook, split_path
from stateward.domain.registry import grants_reference, owns
from stateward.persistence import UnitOfWork
from stateward.persistence.access import namespace_scopes
from stateward.runtime.core.services import Runtime


async def _registries(uow: UnitOfWork, namespace: str) -> list[Mapping[str, Any]]:
    """The registry data of `namespace` and of every namespace above it (and `system`)."""
    found = await uow.processes.processes_by_ids(
        [registry_id(s) for s in namespace_scopes(namespace)]
    )
    return [p.data for p in found.values() if isinstance(p.data, Mapping)]


async def may_spawn(uow: UnitOfWork, consumer: str, target_path: str) -> bool:
    """May a workflow of namespace `consumer` spawn instances of `target_path`?"""
    target = split_path(target_path)[0]
    return owns(consumer, target) or grants_reference(await _registries(uow, target), consumer)


async def may_use_module(uow: UnitOfWork, consumer: str, namespace: str, name: str) -> bool:
    """May a workflow of namespace `consumer` run module `name` of `namespace` as a hook?"""
    if owns(consumer, namespace):
        return True
    return grants_reference(await _registries(uow, namespace), consumer, module=name)


async def spawn_targets(uow: UnitOfWork, consumer: str, paths: Iterable[str]) -> set[str]:
    """The subset of `paths` (deployed workflows) that `consumer` may spawn."""
    out: set[str] = set()
    decided: dict[str, bool] = {}
    for path in paths:
        target = split_path(path)[0]
        if target not in decided:
            decided[target] = owns(consumer, target) or grants_reference(
                await _registries(uow, target), consumer
            )
        if decided[target]:
            out.add(path)
    return out


async def spawnable(runtime: Runtime, consumer: str, paths: Iterable[str]) -> set[str]:
    """`spawn_targets` in a read transaction of its own (for `validateWorkflow`)."""
    async with runtime.uow(readonly=True) as uow:
        return await spawn_targets(uow, consumer, paths)


async def usable_modules(uow: UnitOfWork, consumer: str, namespaces: Iterable[str]) -> set[str]:
    """`namespace/name` of the latest modules of `namespaces` that `consumer` may use."""
    out: set[str] = set()
    for namespace in namespaces:
        modules = await uow.modules.latest_in(namespace)
        if owns(consumer, namespace):
            out.update(f"{namespace}/{m.name}" for m in modules)
            continue
        registries = await _registries(uow, namespace)
        out.update(
            f"{namespace}/{m.name}"
            for m in modules
            if grants_reference(registries, consumer, module=m.name)
        )
    return out


def hook_namespaces(definition: Mapping[str, Any], own: str) -> set[str]:
    """Namespaces whose modules the definition's hooks may name."""
    found = {own}
    states = definition.get("states")
    if isinstance(states, Mapping):
        for state in states.values():
            hook = state.get("hook") if isinstance(state, Mapping) else None
            if isinstance(hook, str) and "/" in hook.split(":", 1)[0]:
                found.add(hook.split(":", 1)[0].rsplit("/", 1)[0])
    return found


async def modules_usable(
    runtime: Runtime, consumer: str, definition: Mapping[str, Any]
) -> set[str]:
    """`usable_modules` of the namespaces `definition`'s hooks may name, in a read
    transaction of its own (for `validateWorkflow`: the set a deployment checks against)."""
    async with runtime.uow(readonly=True) as uow:
        return await usable_modules(uow, consumer, hook_namespaces(definition, consumer))


def foreign_references(definition: Mapping[str, Any]) -> tuple[set[str], set[tuple[str, str]]]:
    """(namespaces of spawn targets, (namespace, module) of hooks) that lie outside the
    definition's own namespace (and below): what needs a grant."""
    path = definition.get("$path")
    if not isinstance(path, str) or "/" not in path:
        return set(), set()
    own = split_path(path)[0]
    spawns: set[str] = set()
    for action in (definition.get("actions") or {}).values():
        if not isinstance(action, Mapping):
            continue
        mutate = action.get("mutate")
        for items in (
            action.get("spawn"),
            mutate.get("$spawn") if isinstance(mutate, Mapping) else None,
        ):
            for item in items if isinstance(items, list) else [items]:
                target = item.get("workflow") if isinstance(item, Mapping) else None
                if isinstance(target, str) and "/" in target:
                    namespace = target.rsplit("/", 1)[0]
                    if not owns(own, namespace):
                        spawns.add(namespace)
    hooks: set[tuple[str, str]] = set()
    for state in (definition.get("states") or {}).values():
        hook = state.get("hook") if isinstance(state, Mapping) else None
        resolved = resolve_hook(hook, own) if isinstance(hook, str) else None
        if resolved is not None and "/" in resolved[0]:
            namespace, name = resolved[0].rsplit("/", 1)
            if not owns(own, namespace):
                hooks.add((namespace, name))
    return spawns, hooks


async def spawn_granted(uow: UnitOfWork, consumer: str, namespace: str) -> bool:
    """Did `namespace` (or one above it) grant `consumer` spawns? (Ownership aside.)"""
    return grants_reference(await _registries(uow, namespace), consumer)
