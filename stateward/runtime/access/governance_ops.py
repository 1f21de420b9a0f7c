"""Governance events on registries (DESIGN §6): checks before the engine, rows after.

A registry event runs the namespace's bootstrap workflow through the engine (which
records the action in the registry's data); this module adds what needs the database:
the admin check first (FORBIDDEN before any validation finding), full definition
validation with spawn targets and hook modules resolved against what is deployed
(INVALID_DEFINITION with problems, TARGET_MISMATCH among them), and — once the event row
exists — the materialized rows: workflow versions, modules, role grants, the webhook,
key rotation and revocation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from stateward.domain import events as ev
from stateward.domain.access import ADMIN_ROLE, has_role
from stateward.domain.canonical import sha256_hex
from stateward.domain.definition import validate_definition
from stateward.domain.errors import (
    FORBIDDEN,
    INVALID_INPUT,
    TARGET_MISMATCH,
    DomainError,
    InvalidDefinition,
    Problem,
)
from stateward.domain.model import Outcome
from stateward.domain.paths import split_path
from stateward.domain.registry import (
    NODE_ACTIONS,
    grant_roles,
    validate_governance_input,
    webhook_scope,
)
from stateward.domain.versionhash import apply_order, deployed_hash
from stateward.governance.keys import is_public_key
from stateward.records import StoredEvent
from stateward.runtime.core import references
from stateward.runtime.core.delegation import surface_scope
from stateward.runtime.core.kernel import ActContext, apply_engine
from stateward.runtime.hooks.module import check_module

#: `session.info` key set by `batch.act_many`: workflow paths its batch deploys.
PENDING_WORKFLOWS = "stateward.pending_workflows"

OPEN_TO_ANY = frozenset({"rotate_key"})
#: A role name a grant may give: the definition's role-name pattern, bounded.
GRANTABLE_ROLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


async def op_governance(ctx: ActContext) -> Outcome:
    """Evaluate a registry action: admin check, validation, engine, then materialize."""
    name, namespace = ctx.envelope.action.name, ctx.namespace
    if name not in OPEN_TO_ANY and not (ctx.actor.is_system or has_role(ctx.actor, ADMIN_ROLE)):
        raise DomainError(
            FORBIDDEN,
            f"{name} needs the admin role in namespace {namespace!r} (or a prefix, or system)",
        )
    if name in NODE_ACTIONS and ctx.actor.is_system:
        raise DomainError(
            FORBIDDEN, f"{name} is an admin's own signed decision; the system actor cannot make it"
        )
    if name in ("add_workflow", "update_workflow"):
        await _validate_workflow(ctx)
    elif name in ("add_module", "update_module"):
        _validate_module(ctx.input)
    elif name == "grant_role":
        _validate_grant(ctx.input)
    elif name == "rotate_key":
        _validate_new_key(ctx.input, ctx.actor.id)
    elif name in NODE_ACTIONS:
        key = ctx.input.get("key")
        if not (isinstance(key, str) and is_public_key(key)):
            raise DomainError(INVALID_INPUT, "`key` must be a node's public key", pointer="/key")
    outcome = apply_engine(ctx)
    ctx.after_event.append(lambda event: _materialize(ctx, event))
    return outcome


async def _validate_workflow(ctx: ActContext) -> None:
    """Full validation of a deployed definition; raise InvalidDefinition with problems."""
    shape = validate_governance_input(ctx.envelope.action.name, ctx.input, namespace=ctx.namespace)
    mismatches = [p for p in shape if p.code == TARGET_MISMATCH]
    if mismatches:
        raise InvalidDefinition(mismatches)
    if shape:
        first = shape[0]
        raise DomainError(INVALID_INPUT, first.message, pointer=first.pointer, problems=shape)
    definition = ctx.input["definition"]
    uow = ctx.uow
    # Spawn targets and hook modules of other namespaces count only when granted by
    # them (`allow_spawn` / `share_module`); the rest looks exactly like what does not
    # exist, so a deployment error never tells which foreign names exist.
    known = {w.path for w in await uow.workflows.in_namespace(None)}
    known.update(uow.session.info.get(PENDING_WORKFLOWS, ()))  # act_many: same batch
    deployed = await references.spawn_targets(uow, ctx.namespace, known)
    deployed.add(str(definition.get("$path")))
    hook_namespaces = references.hook_namespaces(definition, ctx.namespace)
    module_paths = await references.usable_modules(uow, ctx.namespace, hook_namespaces)
    report = validate_definition(
        definition,
        deployed=deployed,
        target=ctx.input.get("target"),
        modules=module_paths.__contains__,
    )
    if not report.valid:
        raise InvalidDefinition(report.errors)


def _validate_grant(input: Mapping[str, Any]) -> None:
    """A grant names a real actor (an Ed25519 public key) and well-formed role names
    (`GRANTABLE_ROLE`, at most 64 characters; never `*`, which in a definition means
    anyone). INVALID_INPUT with a problem per bad value."""
    problems: list[Problem] = []
    actor = input.get("actor")
    if not (isinstance(actor, str) and is_public_key(actor)):
        problems.append(Problem(INVALID_INPUT, "`actor` must be an actor's public key", "/actor"))
    raw = input.get("roles", input.get("role"))
    names = raw.split(",") if isinstance(raw, str) else raw if isinstance(raw, list) else []
    for i, role in enumerate(names):
        if not (isinstance(role, str) and GRANTABLE_ROLE.fullmatch(role.strip())):
            problems.append(Problem(
                INVALID_INPUT,
                "role names match [a-z0-9][a-z0-9_-]* (any case), at most 64 characters; "
                "`*` is not a role",
                f"/roles/{i}",
            ))  # fmt: skip
    if problems:
        first = problems[0]
        raise DomainError(INVALID_INPUT, first.message, pointer=first.pointer, problems=problems)


def _validate_new_key(input: Mapping[str, Any], signer: str) -> None:
    """`rotate_key` moves the signer's grants to `new_key`: it must be a real Ed25519 public
    key other than the signer's own, or the signer would retire itself for nothing."""
    new_key = input.get("new_key")
    if not (isinstance(new_key, str) and is_public_key(new_key)):
        raise DomainError(INVALID_INPUT, "`new_key` must be a public key", pointer="/new_key")
    if new_key == signer:
        raise DomainError(INVALID_INPUT, "`new_key` is the key being rotated", pointer="/new_key")


def _validate_module(input: Mapping[str, Any]) -> None:
    """Starlark syntax and name shape of a module; INVALID_INPUT with problems."""
    problems: list[Problem] = check_module(input.get("source"), input.get("name"))  # type: ignore[arg-type]
    if problems:
        raise DomainError(
            INVALID_INPUT,
            f"invalid module: {problems[0].message}",
            pointer=problems[0].pointer,
            problems=problems,
        )


async def _materialize(ctx: ActContext, event: StoredEvent) -> None:
    """Write the rows a governance event stands for (same transaction as the event)."""
    uow, now, namespace, input = ctx.uow, ctx.now, ctx.namespace, ctx.input
    name = ctx.envelope.action.name
    if name in ("add_workflow", "update_workflow"):
        # The authored order, which the signed input carries as `order` (RFC 8785 sorts
        # the definition's keys): ordinals and `advance` depend on it, the hash covers it.
        source = apply_order(input["definition"], input.get("order"))
        digest, scheme = deployed_hash(input)
        authored = json.dumps(source, ensure_ascii=False, separators=(",", ":"))
        record = await uow.workflows.add_version(
            source["$path"], authored, digest, now, event.id, scheme
        )
        ctx.payload_overrides[ev.WORKFLOW_DEPLOYED] = {
            ev.F_NAMESPACE: split_path(record.path)[0],
            ev.F_WORKFLOW: record.path,
            ev.F_VERSION: record.version,
        }
    elif name == "remove_workflow":
        await uow.workflows.remove(input["path"], now)
    elif name in ("add_module", "update_module"):
        source = input["source"]
        await uow.modules.add_version(
            namespace, input["name"], source, sha256_hex(source.encode("utf-8")), now, event.id
        )
    elif name == "grant_role":
        for role in grant_roles(input):
            await uow.grants.grant(namespace, input["actor"], role, now, event.id)
    elif name == "revoke_role":
        for role in grant_roles(input):
            await uow.grants.revoke(namespace, input["actor"], role)
    elif name == "set_webhook":
        scope = webhook_scope(input["workflow"]) if input.get("workflow") else namespace
        if input.get("surface"):
            scope = surface_scope(namespace, input["surface"])
        await uow.webhooks.set(scope, input.get("url"), input.get("secret"), now, event.id)
    elif name == "rotate_key":
        await uow.grants.move(ctx.actor.id, input["new_key"], now)
        await uow.keys.rotate(ctx.actor.id, input["new_key"], event.ts, event.id)
    elif name == "revoke_key":
        key = input["key"]
        for grant in await uow.grants.members(namespace):
            if grant.actor == key:
                await uow.grants.revoke(namespace, key, grant.role)
        await uow.keys.revoke(key, event.ts, event.id)
