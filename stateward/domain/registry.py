"""Registry data: what the governance actions of the bootstrap workflow record (DESIGN §6).

A registry process's data is the materialized state of its namespace, rebuilt exactly by
replaying its events:
`{"state", "workflows": {path: {version, hash, removed?}}, "modules": {name: {version,
hash}}, "members": {actor: [roles]}, "webhook": {url, signed}, "keys": {rotated: {old:
new}, revoked: [key]}}`. The engine calls `check_input` (step 4), `reduce` (after the
mutation) and `domain_events` for every action of a bootstrap definition.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from stateward.domain import events as ev
from stateward.domain.canonical import sha256_hex
from stateward.domain.errors import CONFLICT, INVALID_INPUT, NOT_FOUND, DomainError, Problem
from stateward.domain.model import Actor, DomainEvent
from stateward.domain.paths import SEGMENT, is_canonical_path, is_namespace, split_path
from stateward.domain.versionhash import deployed_hash, order_problems

WORKFLOW_ACTIONS = ("add_workflow", "update_workflow", "remove_workflow")
MODULE_ACTIONS = ("add_module", "update_module")
ROLE_ACTIONS = ("grant_role", "revoke_role")
KEY_ACTIONS = ("rotate_key", "revoke_key")
#: System registry only (admin): a node key may attest events (sign for `system`,
#: visitors and bearer-token users) from the event after `trust_node` until a
#: `distrust_node`. Recorded as `nodes: {trusted: [key], distrusted: [key]}`.
NODE_ACTIONS = ("trust_node", "distrust_node")
#: Cross-namespace references are granted by the TARGET namespace, never assumed (issue
#: 10): `allow_spawn {namespace}` lets workflows of that (consuming) namespace, and of the
#: namespaces below it, spawn instances of this namespace's workflows (and those below);
#: `share_module {name, namespace}` lets them use module `name` as a hook.
SPAWN_ACTIONS = ("allow_spawn", "disallow_spawn")
SHARE_ACTIONS = ("share_module", "unshare_module")
REFERENCE_ACTIONS = (*SPAWN_ACTIONS, *SHARE_ACTIONS)
GOVERNANCE_ACTIONS = (
    *WORKFLOW_ACTIONS, *MODULE_ACTIONS, *ROLE_ACTIONS, "set_webhook", *REFERENCE_ACTIONS,
)  # fmt: skip
ROLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
#: A delegated state's `surface` (a package id) as a webhook may name it.
SURFACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")
TARGET_MISMATCH = "TARGET_MISMATCH"


def check_input(namespace: str, action: str, input: Mapping[str, Any]) -> None:
    """Raise INVALID_INPUT (with every problem) when `input` does not fit `action`."""
    problems = validate_governance_input(action, input, namespace=namespace)
    if problems:
        first = problems[0]
        raise DomainError(
            INVALID_INPUT,
            f"invalid {action} input: {first.pointer or '/'}: {first.message}",
            pointer=first.pointer,
            problems=problems,
        )


#: The `webhooks` row (and delivery scope) of a workflow's own webhook: `workflow:<path>`
#: (a namespace never contains ':', so it cannot collide with a namespace's row).
WORKFLOW_WEBHOOK_PREFIX = "workflow:"


def webhook_scope(workflow: str) -> str:
    """The webhook scope of workflow `workflow`'s own webhook."""
    return f"{WORKFLOW_WEBHOOK_PREFIX}{workflow}"


def validate_governance_input(
    action: str, input: Mapping[str, Any], *, namespace: str
) -> list[Problem]:
    """Problems (code INVALID_INPUT, or TARGET_MISMATCH for a path outside `namespace`)
    of a governance action's input; [] when it is well formed."""
    out: list[Problem] = []

    def bad(pointer: str, message: str, code: str = INVALID_INPUT) -> None:
        out.append(Problem(code, message, pointer))

    def text(key: str, *, optional: bool = False) -> str | None:
        value = input.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value:
            bad(f"/{key}", f"`{key}` must be a non-empty string")
            return None
        return value

    if action in ("add_workflow", "update_workflow"):
        definition = input.get("definition")
        if not isinstance(definition, Mapping):
            bad("/definition", "`definition` must be a workflow definition object")
        else:
            path = definition.get("$path")
            if not is_canonical_path(path):
                bad("/definition/$path", "`$path` must be a canonical workflow path")
            elif split_path(str(path))[0] != namespace:
                bad("/definition/$path", f"`$path` is not in namespace {namespace!r}",
                    TARGET_MISMATCH)  # fmt: skip
            target = text("target", optional=True)
            if target is not None and target != path:
                bad("/target", "the deployment target differs from `$path`", TARGET_MISMATCH)
            if input.get("order") is not None:
                out.extend(order_problems(definition, input["order"]))
    elif action == "remove_workflow":
        path = text("path")
        if path is not None and split_path(path)[0] != namespace:
            bad("/path", f"`path` is not in namespace {namespace!r}", TARGET_MISMATCH)
    elif action in MODULE_ACTIONS:
        name = text("name")
        if name is not None and not SEGMENT.fullmatch(name):
            bad("/name", "module names are lower-case segments `[a-z0-9][a-z0-9_-]*`")
        text("source")
    elif action in ROLE_ACTIONS:
        text("actor")
        if not grant_roles(input):
            bad("/roles", "`roles` must be a non-empty list of role names (or give `role`)")
    elif action == "set_webhook":
        url = input.get("url")
        if url is not None and not (isinstance(url, str) and re.match(r"https?://", url)):
            bad("/url", "`url` must be an http(s) URL, or null to remove the webhook")
        text("secret", optional=True)
        workflow = text("workflow", optional=True)
        if workflow is not None and (
            not is_canonical_path(workflow) or split_path(workflow)[0] != namespace
        ):
            bad("/workflow", f"`workflow` is not a workflow path of {namespace!r}",
                TARGET_MISMATCH)  # fmt: skip
        surface = text("surface", optional=True)
        if surface is not None and workflow is not None:
            bad("/surface", "give `workflow` or `surface`, not both")
        elif surface is not None and not SURFACE.fullmatch(surface):
            bad("/surface", "`surface` must be a package id `[A-Za-z0-9][A-Za-z0-9._/-]*`")
    elif action in REFERENCE_ACTIONS:
        consumer = text("namespace")
        if consumer is not None and not is_namespace(consumer):
            bad("/namespace", "`namespace` must be a namespace (the consuming one)")
        elif consumer is not None and consumer == namespace:
            bad("/namespace", "a namespace needs no grant to use its own workflows and modules")
        if action in SHARE_ACTIONS:
            name = text("name")
            if name is not None and not SEGMENT.fullmatch(name):
                bad("/name", "module names are lower-case segments `[a-z0-9][a-z0-9_-]*`")
    elif action == "rotate_key":
        text("new_key")
    elif action == "revoke_key" or action in NODE_ACTIONS:
        text("key")
    return out


def grant_roles(input: Mapping[str, Any]) -> list[str]:
    """The lower-cased role names of a grant/revoke (`roles` list or `role` comma list)."""
    raw = input.get("roles", input.get("role"))
    if isinstance(raw, str):
        raw = raw.split(",")
    if not isinstance(raw, list) or not raw:
        return []
    names = [r.strip() for r in raw if isinstance(r, str)]
    if len(names) != len(raw) or not all(ROLE_NAME.fullmatch(n) or n == "*" for n in names):
        return []
    return sorted({n.lower() for n in names})


def reduce(
    namespace: str,
    action: str,
    data: dict[str, Any],
    input: Mapping[str, Any],
    actor: Actor,
    ts: str,
) -> dict[str, Any]:
    """Record `action` in the registry data (`data` is the engine's new, owned dict; nested
    objects are copied before they change). Add of an existing path/module: CONFLICT;
    update/remove of a missing one: NOT_FOUND."""
    del namespace, ts
    if action in WORKFLOW_ACTIONS:
        workflows = dict(data.get("workflows") or {})
        path = input["path"] if action == "remove_workflow" else input["definition"]["$path"]
        current = workflows.get(path)
        live = current is not None and not current.get("removed")
        if action == "add_workflow" and live:
            raise DomainError(CONFLICT, f"workflow {path} already exists; use update_workflow")
        if action != "add_workflow" and not live:
            raise DomainError(NOT_FOUND, f"workflow {path} does not exist")
        version = int(current["version"]) if current else 0
        if action == "remove_workflow":
            assert current is not None
            workflows[path] = {**current, "removed": True}
        else:
            digest, _scheme = deployed_hash(input)
            workflows[path] = {"version": version + 1, "hash": digest}
        data["workflows"] = workflows
    elif action in MODULE_ACTIONS:
        modules = dict(data.get("modules") or {})
        name = input["name"]
        if action == "add_module" and name in modules:
            raise DomainError(CONFLICT, f"module {name} already exists; use update_module")
        if action == "update_module" and name not in modules:
            raise DomainError(NOT_FOUND, f"module {name} does not exist")
        version = int(modules[name]["version"]) + 1 if name in modules else 1
        modules[name] = {"version": version, "hash": sha256_hex(input["source"].encode())}
        data["modules"] = modules
    elif action in ROLE_ACTIONS:
        members = dict(data.get("members") or {})
        member, roles = input["actor"], set(grant_roles(input))
        held = set(members.get(member) or ())
        held = held | roles if action == "grant_role" else held - roles
        _set_member(members, member, held)
        data["members"] = members
    elif action in REFERENCE_ACTIONS:
        _reduce_references(action, data, input)
    elif action == "set_webhook" and input.get("surface"):
        # A surface's webhook (issue 13): delegated stages of that surface are posted there.
        hooks = dict(data.get("surface_webhooks") or {})
        if input.get("url") is None:
            hooks.pop(input["surface"], None)
        else:
            hooks[input["surface"]] = {"url": input["url"], "signed": bool(input.get("secret"))}
        if hooks:
            data["surface_webhooks"] = hooks
        else:
            data.pop("surface_webhooks", None)
    elif action == "set_webhook" and input.get("workflow"):
        # A workflow's own webhook (issue 13): before the namespace's for its SLA breaches.
        hooks = dict(data.get("workflow_webhooks") or {})
        if input.get("url") is None:
            hooks.pop(input["workflow"], None)
        else:
            hooks[input["workflow"]] = {"url": input["url"], "signed": bool(input.get("secret"))}
        if hooks:
            data["workflow_webhooks"] = hooks
        else:
            data.pop("workflow_webhooks", None)
    elif action == "set_webhook":
        if input.get("url") is None:
            data.pop("webhook", None)
        else:
            # The secret itself stays out of process data (only the webhooks table holds it).
            data["webhook"] = {"url": input["url"], "signed": bool(input.get("secret"))}
    elif action in KEY_ACTIONS:
        _reduce_keys(action, data, input, actor)
    elif action in NODE_ACTIONS:
        _reduce_nodes(action, data, input["key"])
    return data


def _reduce_nodes(action: str, data: dict[str, Any], key: str) -> None:
    """trust_node adds `key` to `nodes.trusted` (and drops it from `nodes.distrusted`);
    distrust_node does the opposite. Both lists stay sorted."""
    nodes = data.get("nodes") or {}
    trusted, distrusted = set(nodes.get("trusted") or ()), set(nodes.get("distrusted") or ())
    if action == "trust_node":
        trusted.add(key)
        distrusted.discard(key)
    else:
        trusted.discard(key)
        distrusted.add(key)
    data["nodes"] = {"trusted": sorted(trusted), "distrusted": sorted(distrusted)}


def trusted_nodes(system_data: Mapping[str, Any], legacy: frozenset[str]) -> frozenset[str]:
    """The node keys the system registry's data trusts now: those of `trust_node` events,
    plus the `legacy` keys (trusted before node trust was governed, migration 0009) that
    no `distrust_node` withdrew."""
    nodes = system_data.get("nodes") or {}
    distrusted = frozenset(nodes.get("distrusted") or ())
    return frozenset(nodes.get("trusted") or ()) | (legacy - distrusted)


def _reduce_references(action: str, data: dict[str, Any], input: Mapping[str, Any]) -> None:
    """Record a spawn allowance (`spawn_allowed: [namespace]`) or a module share
    (`shared_modules: {name: [namespace]}`). Sharing a module the registry does not hold
    is NOT_FOUND; withdrawing what was never granted changes nothing."""
    consumer = input["namespace"]
    if action in SPAWN_ACTIONS:
        allowed = set(data.get("spawn_allowed") or ())
        allowed = allowed | {consumer} if action == "allow_spawn" else allowed - {consumer}
        data["spawn_allowed"] = sorted(allowed)
        return
    name = input["name"]
    if action == "share_module" and name not in (data.get("modules") or {}):
        raise DomainError(NOT_FOUND, f"module {name} does not exist")
    shared = {k: list(v) for k, v in (data.get("shared_modules") or {}).items()}
    held = set(shared.get(name) or ())
    held = held | {consumer} if action == "share_module" else held - {consumer}
    if held:
        shared[name] = sorted(held)
    else:
        shared.pop(name, None)
    data["shared_modules"] = shared


def grants_reference(
    registries: list[Mapping[str, Any]], consumer: str, module: str | None = None
) -> bool:
    """Do the registry datas of a target namespace and its prefixes let `consumer` spawn
    into it (`module` None) or use its module `module`? A grant to namespace C covers C
    and every namespace below it (like role grants)."""
    for data in registries:
        if module is None:
            granted = data.get("spawn_allowed") or ()
        else:
            granted = (data.get("shared_modules") or {}).get(module) or ()
        if any(consumer == c or consumer.startswith(c + "/") for c in granted):
            return True
    return False


def owns(consumer: str, target: str) -> bool:
    """True when `target` is `consumer` or below it: its admins govern both, no grant
    is needed."""
    return target == consumer or target.startswith(consumer + "/")


def _set_member(members: dict[str, Any], member: str, roles: set[str]) -> None:
    """Store a member's roles sorted, dropping members left without any."""
    if roles:
        members[member] = sorted(roles)
    else:
        members.pop(member, None)


def _reduce_keys(action: str, data: dict[str, Any], input: Mapping[str, Any], actor: Actor) -> None:
    """rotate_key moves the signer's grants to `new_key`; revoke_key drops a key's grants."""
    keys = dict(data.get("keys") or {})
    members = dict(data.get("members") or {})
    if action == "rotate_key":
        old, new = actor.id, input["new_key"]
        _set_member(members, new, set(members.get(new) or ()) | set(members.get(old) or ()))
        members.pop(old, None)
        keys["rotated"] = {**(keys.get("rotated") or {}), old: new}
    else:
        key = input["key"]
        members.pop(key, None)
        keys["revoked"] = sorted({*(keys.get("revoked") or ()), key})
    data["keys"] = keys
    data["members"] = members


def domain_events(action: str, input: Mapping[str, Any]) -> tuple[DomainEvent, ...]:
    """Bus events of a governance action: `workflow.deployed`, `registry.role.*`."""
    if action in ("add_workflow", "update_workflow"):
        path = input["definition"]["$path"]
        return (DomainEvent(ev.WORKFLOW_DEPLOYED, details={ev.D_PATH: path}),)
    if action in ROLE_ACTIONS:
        kind = ev.ROLE_GRANTED if action == "grant_role" else ev.ROLE_REVOKED
        details = {ev.D_MEMBER: input["actor"], ev.D_ROLES: grant_roles(input)}
        return (DomainEvent(kind, details=details),)
    return ()


#: Governance inputs that carry secrets. The signed log keeps them (verify needs the exact
#: bytes), but nothing shown to API clients may: `redact_input` masks them.
SECRET_INPUTS: Mapping[str, tuple[str, ...]] = {"set_webhook": ("secret",)}
REDACTED = "[redacted]"


def redact_input(action: str, input: Mapping[str, Any]) -> Mapping[str, Any]:
    """`input` with the secret fields of `action` masked (unchanged for other actions)."""
    keys = [k for k in SECRET_INPUTS.get(action, ()) if input.get(k)]
    if not keys:
        return input
    return {**input, **dict.fromkeys(keys, REDACTED)}
