"""Export, import and clone workflows (DESIGN §7 "Clone, export/import packages").

- `export_package` reads the latest version of every live workflow of a namespace and of
  the namespaces below it (or only the `paths` named) as authored JSON (state and action
  order kept: RFC 8785 would sort them), plus the Starlark modules they may call.
- `import_package` validates the whole package first (`package_check`), then deploys it
  through signed registry events — modules first, then workflows; add when the path is
  new (or was removed), update when it is live, nothing when the same text is already the
  latest — all in ONE transaction (`batch.act_many`): all or nothing.
- `clone_workflow` deploys a copy of a workflow's latest version under another path
  through a signed `add_workflow` event (the one path).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from stateward.domain.access import ADMIN_ROLE
from stateward.domain.bootstrap import bootstrap_path
from stateward.domain.errors import (
    CONFLICT,
    FORBIDDEN,
    INVALID_INPUT,
    NOT_FOUND,
    DomainError,
    InvalidDefinition,
    Problem,
)
from stateward.domain.model import SYSTEM_ACTOR
from stateward.domain.paths import (
    is_namespace,
    path_problems,
    registry_id,
    resolve_hook,
    split_path,
)
from stateward.domain.versionhash import definition_order
from stateward.governance.envelope import SignedEnvelope
from stateward.governance.keys import KeyPair
from stateward.persistence import UnitOfWork
from stateward.runtime.access.registry import (
    DeployedWorkflow,
    Signer,
    deploy_workflow,
    get_workflow,
)
from stateward.runtime.core import references
from stateward.runtime.core.commands import attest, sign_as
from stateward.runtime.core.ops_support import actor_id
from stateward.runtime.core.policy import not_found
from stateward.runtime.core.services import Runtime
from stateward.runtime.packages.batch import act_many
from stateward.runtime.packages.check import (
    FORMAT,
    Package,
    PackageModule,
    check_package,
    hook_namespaces,
    parse_package,
)

__all__ = ["FORMAT", "clone_workflow", "export_package", "import_package"]


def within(namespace: str, root: str) -> bool:
    """True when `namespace` is `root` or below it (`customer/retail` is within `customer`)."""
    return namespace == root or namespace.startswith(root + "/")


def _signer_id(actor: Signer | Any) -> str:
    """The actor id of a key pair, an actor id or a viewer-like object."""
    return actor.public if isinstance(actor, KeyPair) else actor_id(actor)


async def _require_role(uow: UnitOfWork, actor: str, namespace: str, role: str | None) -> None:
    """FORBIDDEN unless `actor` holds `role` (any role when None) in `namespace`."""
    if actor == SYSTEM_ACTOR:
        return
    roles = await uow.grants.roles_of(actor, namespace)
    if (role is None and not roles) or (role is not None and role not in roles):
        need = f"the {role} role" if role else "a role"
        raise DomainError(FORBIDDEN, f"{actor} needs {need} in namespace {namespace!r}")


async def _reads(uow: UnitOfWork, actor: str, namespace: str) -> bool:
    """The read rule for `actor` in `namespace` (the system reads everything)."""
    return actor == SYSTEM_ACTOR or bool(await uow.grants.roles_of(actor, namespace))


async def export_package(
    runtime: Runtime,
    viewer: Any,
    namespace: str,
    paths: list[str] | None = None,
    *,
    with_dependencies: bool = False,
) -> dict[str, Any]:
    """The package of `namespace` (and the namespaces below it), or of `paths` only.

    `viewer` (an actor id or an object with `id`; `system` for the CLI) needs a role in
    `namespace`. Workflows: the latest version of each, as authored, sorted by path.
    Modules: the latest of every module of the exported namespaces (all of them when
    `paths` is None, else only the ones the selected workflows' hooks name) plus modules
    of other namespaces that the hooks name, so that the package imports on its own.
    A named path that is not a live workflow of the namespace is NOT_FOUND.

    `with_dependencies` (issue 15) also adds every workflow the exported ones spawn that
    lies outside the selection (another namespace's, transitively: its own spawns and
    hook modules too), when the viewer may read it. Whatever the package refers to but
    does not hold is listed under `dependencies` (`[{"kind": "workflow"|"module",
    "path"}]`), so `import` can name it.
    """
    who = actor_id(viewer)
    if not is_namespace(namespace):
        raise DomainError(INVALID_INPUT, f"{namespace!r} is not a namespace", pointer="/namespace")
    async with runtime.uow(readonly=True) as uow:
        if not await _reads(uow, who, namespace):
            raise not_found("namespace")
        everything = {w.path: w for w in await uow.workflows.in_namespace(None)}
        live = {p: w for p, w in everything.items() if within(w.namespace, namespace)}
        selected = sorted(live) if paths is None else list(dict.fromkeys(paths))
        missing = [
            Problem(NOT_FOUND, f"{p!r} is not a live workflow of {namespace}", f"/paths/{i}")
            for i, p in enumerate(selected)
            if p not in live
        ]
        if missing:
            raise DomainError(
                NOT_FOUND, missing[0].message, pointer=missing[0].pointer, problems=missing
            )
        versions = await uow.workflows.latest_versions(selected)
        workflows = [versions[p].source() for p in selected]
        if with_dependencies:
            workflows.extend(await _dependencies(uow, who, workflows, set(everything)))
        wanted = _hook_modules(workflows)
        if paths is None:
            for ns in await uow.processes.registry_namespaces():
                if within(ns, namespace):
                    wanted.update((m.namespace, m.name) for m in await uow.modules.latest_in(ns))
        modules = []
        for ns, name in sorted(wanted):
            if not within(ns, namespace) and not await _reads(uow, who, ns):
                continue  # another namespace's source: only for those who may read it
            module = await uow.modules.get(ns, name)
            if module is not None:
                modules.append(PackageModule(ns, name, module.source, module.hash).as_dict())
    package: dict[str, Any] = {
        "format": FORMAT, "namespace": namespace, "workflows": workflows, "modules": modules,
    }  # fmt: skip
    needed = _unresolved(workflows, modules)
    if needed:
        package["dependencies"] = needed
    return package


async def _dependencies(
    uow: UnitOfWork, who: str, workflows: list[dict[str, Any]], live: set[str]
) -> list[dict[str, Any]]:
    """The latest sources of the live workflows `workflows` spawn (transitively) that are
    not among them and that `who` may read, sorted by path."""
    have = {str(w["$path"]) for w in workflows}
    added: dict[str, dict[str, Any]] = {}
    frontier = [t for w in workflows for t in _spawn_targets(w)]
    while frontier:
        path = frontier.pop()
        if path in have or path in added or path not in live:
            continue
        if not await _reads(uow, who, split_path(path)[0]):
            continue
        version = (await uow.workflows.latest_versions([path]))[path]
        added[path] = version.source()
        frontier.extend(_spawn_targets(added[path]))
    return [added[p] for p in sorted(added)]


def _spawn_targets(source: Mapping[str, Any]) -> set[str]:
    """Every workflow path a definition's spawn items (`spawn`, `mutate.$spawn`) name."""
    found: set[str] = set()
    for action in (source.get("actions") or {}).values():
        if not isinstance(action, Mapping):
            continue
        mutate = action.get("mutate")
        for items in (
            action.get("spawn"),
            mutate.get("$spawn") if isinstance(mutate, Mapping) else None,
        ):
            for item in items if isinstance(items, list) else [items]:
                target = item.get("workflow") if isinstance(item, Mapping) else None
                if isinstance(target, str):
                    found.add(target)
    return found


def _unresolved(
    workflows: list[dict[str, Any]], modules: list[dict[str, Any]]
) -> list[dict[str, str]]:
    """What the package's workflows refer to (spawn targets, hook modules) but it does not
    hold: `[{"kind", "path"}]`, workflows then modules, by path."""
    have = {str(w["$path"]) for w in workflows}
    held = {f"{m['namespace']}/{m['name']}" for m in modules}
    spawned = {t for w in workflows for t in _spawn_targets(w)} - have
    hooked = {f"{ns}/{name}" for ns, name in _hook_modules(workflows)} - held
    return [{"kind": "workflow", "path": p} for p in sorted(spawned)] + [
        {"kind": "module", "path": p} for p in sorted(hooked)
    ]


def _hook_modules(workflows: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(namespace, module) of every hook the workflows name."""
    found: set[tuple[str, str]] = set()
    for source in workflows:
        namespace = split_path(source["$path"])[0]
        for state in (source.get("states") or {}).values():
            hook = state.get("hook") if isinstance(state, Mapping) else None
            resolved = resolve_hook(hook, namespace) if isinstance(hook, str) else None
            if resolved is not None and "/" in resolved[0]:
                ns, name = resolved[0].rsplit("/", 1)
                found.add((ns, name))
    return found


async def import_package(
    runtime: Runtime, actor: Signer, package: str | bytes | Mapping[str, Any]
) -> list[DeployedWorkflow]:
    """Deploy a package all-or-nothing; the deployed (or unchanged) workflows, in order.

    `actor`: an actor id (server-attested events) or a `KeyPair` (client-signed, the CLI).
    The actor needs `admin` in every namespace the package deploys into (FORBIDDEN, checked
    before validation). Any validation problem raises `InvalidDefinition` with pointers into
    the package and deploys nothing; so does any failing event of the deployment.
    """
    who = _signer_id(actor)
    parsed, problems = parse_package(package)
    if problems:
        raise InvalidDefinition(problems)
    async with runtime.uow(readonly=True) as uow:
        for namespace in sorted(parsed.namespaces()):
            await _require_role(uow, who, namespace, ADMIN_ROLE)
        everything = await uow.workflows.in_namespace(None, include_removed=True)
        live = {w.path for w in everything if not w.removed}
        existing_modules: dict[str, str] = {}
        for ns in hook_namespaces(parsed) | {m.namespace for m in parsed.modules}:
            existing_modules.update(
                {f"{ns}/{m.name}": m.hash for m in await uow.modules.latest_in(ns)}
            )
        problems = check_package(
            parsed, deployed=live, deployed_modules=existing_modules.__contains__
        )
        if problems:
            problems[:0] = await _missing_dependencies(uow, parsed, live)
            raise InvalidDefinition(problems)
        latest = await uow.workflows.latest_versions(p for p in parsed.paths if p in live)
        grants = await _package_grants(uow, parsed)
    plan = _plan(
        runtime, actor, parsed, live, existing_modules, {p: v.source() for p, v in latest.items()}
    )
    # Modules first, then the grants one namespace of the package gives another (the
    # importer is admin in both), then the workflows that need them.
    modules = sum(1 for _, where in plan if where.startswith("/modules/"))
    plan[modules:modules] = [
        (_envelope(runtime, actor, namespace, action, input), "/grants")
        for namespace, action, input in grants
    ]
    envelopes = [signed for signed, _ in plan]
    try:
        await act_many(
            runtime,
            envelopes,
            attested=not isinstance(actor, KeyPair),
            pending_workflows=parsed.paths,
        )
    except DomainError as error:
        raise _in_package(error, [where for _, where in plan]) from error
    found = [await get_workflow(runtime, path) for path in parsed.paths]
    return [w for w in found if w is not None]


async def _missing_dependencies(uow: UnitOfWork, package: Package, live: set[str]) -> list[Problem]:
    """The dependencies a package lists (issue 15) that neither it nor this deployment
    holds: one UNRESOLVED_SPAWN / UNRESOLVED_HOOK each, at `/dependencies/<i>`, naming
    it and the remedy."""
    held = set(package.paths) | live
    own_modules = {m.path for m in package.modules}
    found: list[Problem] = []
    for i, item in enumerate(package.dependencies):
        kind, path = item["kind"], item["path"]
        if kind == "workflow" and path not in held:
            code = "UNRESOLVED_SPAWN"
        elif kind == "module" and path not in own_modules:
            ns, name = path.rsplit("/", 1)
            if await uow.modules.get(ns, name) is not None:
                continue
            code = "UNRESOLVED_HOOK"
        else:
            continue
        found.append(
            Problem(
                code,
                f"the package depends on {kind} {path}, which is neither in it nor deployed "
                "here: deploy it first, or export with --with-dependencies",
                f"/dependencies/{i}",
            )
        )
    return found


async def _package_grants(
    uow: UnitOfWork, package: Package
) -> list[tuple[str, str, dict[str, Any]]]:
    """(namespace, action, input) of the `allow_spawn` / `share_module` events that the
    package's cross-namespace references between its own namespaces still need."""
    inside = package.namespaces()
    out: list[tuple[str, str, dict[str, Any]]] = []
    for source in package.workflows:
        own = split_path(str(source["$path"]))[0]
        spawns, hooks = references.foreign_references(source)
        for namespace in sorted(spawns & inside):
            item = (namespace, "allow_spawn", {"namespace": own})
            if item not in out and not await references.may_spawn(uow, own, f"{namespace}/x"):
                out.append(item)
        for namespace, name in sorted(hooks):
            item = (namespace, "share_module", {"name": name, "namespace": own})
            if namespace not in inside or item in out:
                continue
            if not await references.may_use_module(uow, own, namespace, name):
                out.append(item)
    return out


def _plan(
    runtime: Runtime,
    actor: Signer,
    package: Package,
    live: set[str],
    modules: dict[str, str],
    latest: dict[str, dict[str, Any]],
) -> list[tuple[SignedEnvelope, str]]:
    """The signed events that deploy `package` (modules first), each with its pointer."""
    events: list[tuple[SignedEnvelope, str]] = []
    for i, module in enumerate(package.modules):
        if modules.get(module.path) == module.hash:
            continue  # the same source is already the latest version
        action = "update_module" if module.path in modules else "add_module"
        input: dict[str, Any] = {"name": module.name, "source": module.source}
        events.append((_envelope(runtime, actor, module.namespace, action, input), f"/modules/{i}"))
    for i, source in enumerate(package.workflows):
        path = str(source["$path"])
        if path in latest and _same_text(latest[path], source):
            continue
        action = "update_workflow" if path in live else "add_workflow"
        input = {"definition": dict(source), "order": definition_order(source)}
        events.append(
            (_envelope(runtime, actor, split_path(path)[0], action, input), f"/workflows/{i}")
        )
    return events


def _same_text(deployed: Mapping[str, Any], source: Mapping[str, Any]) -> bool:
    """Same definition, in the same key order (order matters: ordinals, `advance`)."""
    return json.dumps(deployed) == json.dumps(source)


def _envelope(
    runtime: Runtime, actor: Signer, namespace: str, action: str, input: dict[str, Any]
) -> SignedEnvelope:
    """A governance event on `namespace`'s registry, signed by the key or the node."""
    process, workflow = registry_id(namespace), bootstrap_path(namespace)
    if isinstance(actor, KeyPair):
        return sign_as(runtime, actor, process, action, workflow, input)
    return attest(runtime, actor, process, action, workflow, input)


def _in_package(error: DomainError, pointers: list[str]) -> DomainError:
    """A deployment event's error, with its problems' pointers moved into the package."""
    index = error.details.get("index")
    if not isinstance(index, int) or not 0 <= index < len(pointers):
        return error
    base = pointers[index]
    moved = [
        Problem(p.code, p.message, base + p.pointer.removeprefix("/definition"), p.severity)
        for p in error.problems
    ]
    if isinstance(error, InvalidDefinition):
        return InvalidDefinition(moved)
    return DomainError(
        error.code,
        f"{base}: {error.message}",
        pointer=base + error.pointer,
        problems=moved,
        details=error.details,
    )


async def clone_workflow(
    runtime: Runtime, actor: Signer, source_path: str, target_path: str
) -> DeployedWorkflow:
    """Deploy a copy of `source_path`'s latest version as `target_path` (`add_workflow`).

    The copy's `$path` is the target; spawn items that start the source itself start the
    target (a self-spawning workflow stays self-contained); bare `module:function` hooks
    are qualified with the source's namespace when the target lives elsewhere, so the
    copy calls the same modules. The actor needs a role in the source's namespace (it
    reads it) and `admin` in the target's (checked by the deployment). An invalid target
    is InvalidDefinition (pointer `/target`); a live target is CONFLICT.
    """
    problems = (
        path_problems(target_path, "/target")
        if isinstance(target_path, str)
        else [Problem("INVALID_PATH", "target must be a workflow path", "/target")]
    )
    if problems:
        raise InvalidDefinition(problems)
    who = _signer_id(actor)
    source = await get_workflow(runtime, source_path)
    async with runtime.uow(readonly=True) as uow:
        if (
            source is None
            or source.definition.path is None
            or not await _reads(uow, who, source.namespace)
        ):
            # A source the actor may not read is answered like one that does not exist.
            raise DomainError(
                NOT_FOUND, f"workflow {source_path} is not deployed", pointer="/source"
            )
        # Admin in the target first, so a foreign target's existence does not leak.
        await _require_role(uow, who, split_path(target_path)[0], ADMIN_ROLE)
        current = await uow.workflows.get(target_path)
    if current is not None and not current.removed:
        raise DomainError(CONFLICT, f"workflow {target_path} already exists", pointer="/target")
    copied = cloned_definition(dict(source.definition.source), source_path, target_path)
    await deploy_workflow(runtime, actor, copied)
    deployed = await get_workflow(runtime, target_path)
    assert deployed is not None
    return deployed


def cloned_definition(source: dict[str, Any], source_path: str, target_path: str) -> dict[str, Any]:
    """The definition `source` re-targeted to `target_path` (see `clone_workflow`); key
    order is kept."""
    copied = copy.deepcopy(source)
    copied["$path"] = target_path
    source_ns, target_ns = split_path(source_path)[0], split_path(target_path)[0]
    for action in (copied.get("actions") or {}).values():
        if not isinstance(action, dict):
            continue
        mutate = action.get("mutate")
        for items in (
            action.get("spawn"),
            mutate.get("$spawn") if isinstance(mutate, dict) else None,
        ):
            for item in items if isinstance(items, list) else [items]:
                if isinstance(item, dict) and item.get("workflow") == source_path:
                    item["workflow"] = target_path
    if source_ns != target_ns:
        for state in (copied.get("states") or {}).values():
            hook = state.get("hook") if isinstance(state, dict) else None
            if isinstance(hook, str) and "/" not in hook.split(":", 1)[0]:
                state["hook"] = f"{source_ns}/{hook}"
    return copied
