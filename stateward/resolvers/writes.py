"""Mutation resolvers: every change becomes an envelope on the runtime's one path.

Bearer-token callers get server-attested envelopes (built and signed by the node key on
their behalf); `submitEvent` takes an envelope the client signed itself. Each returns what
the runtime answered (an `ActResult`, a record, a deployed workflow, registry facts); the
schema wraps it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from strawberry.types import Info

from stateward.domain import events as ev
from stateward.domain.errors import FORBIDDEN, INVALID_INPUT, NOT_FOUND, DomainError, Problem
from stateward.domain.paths import registry_id
from stateward.governance.envelope import SignedEnvelope
from stateward.governance.keys import is_public_key
from stateward.records import ApiTokenRecord, ProcessRecord
from stateward.resolvers.context import require_read, runtime, viewer, viewer_or_none
from stateward.resolvers.ids import local_id
from stateward.runtime.access import auth, references, registry, tokens
from stateward.runtime.access.registry import DeployedWorkflow
from stateward.runtime.core import commands, policy, queries
from stateward.runtime.core.act import ActResult, act, current_roles, parse_signed
from stateward.runtime.core.group import act_many
from stateward.runtime.core.queries import RegistryFacts
from stateward.schema.errors import INTERNAL_ERROR, MASKED_MESSAGE, clip

log = logging.getLogger(__name__)


def _object(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DomainError(INVALID_INPUT, f"{name} must be a JSON object", pointer=f"/{name}")
    return dict(value)


async def auth_challenge(info: Info, public_key: str) -> tuple[str, datetime]:
    """`authChallenge(publicKey)`: (challenge, expires at)."""
    return await auth.auth_challenge(runtime(info), public_key)


async def auth_login(
    info: Info, public_key: str, challenge: str, signature: str
) -> tuple[str, str, datetime]:
    """`authLogin(publicKey, challenge, signature)`: (token, actor, expires at)."""
    return await auth.auth_login(runtime(info), public_key, challenge, signature)


async def create_api_token(
    info: Info, label: str | None, actor: str | None, ttl_seconds: float | None
) -> tuple[str, str | None, str, datetime | None]:
    """`createApiToken(label, actor)`: for the viewer, or (system admin) for `actor`;
    (token, label, actor, expires at)."""
    me = viewer(info)
    token, label, expires = await auth.create_api_token(
        runtime(info), me, label=label, actor=actor, ttl_seconds=ttl_seconds
    )
    return token, label, actor or me.actor, expires


async def api_tokens(info: Info) -> list[ApiTokenRecord]:
    """`Query.apiTokens`: the viewer's tokens, newest first (no secrets)."""
    return await tokens.list_api_tokens(runtime(info), viewer(info).actor)


async def revoke_api_token(info: Info, token_id: str) -> ApiTokenRecord:
    """`revokeApiToken(id)`: one of the viewer's own tokens."""
    if not isinstance(token_id, str) or len(token_id) != 64:
        raise DomainError(INVALID_INPUT, "not a token id", pointer="/id")
    revoked = await tokens.revoke_api_token(runtime(info), viewer(info).actor, token_id)
    _forget_viewers(info)
    return revoked


def _forget_viewers(info: Info) -> None:
    """Drop this node's cached token viewers: a token revoked here, or the tokens of a key
    rotated or revoked here, stop authenticating at the next request (other nodes: within
    `VIEWER_TTL`). Key events publish no `registry.*` message the cache could watch."""
    forget = getattr(info.context.services, "forget_viewers", None)
    if forget is not None:
        forget()


MAX_SUBMIT_EVENTS = 1000


async def submit_event(info: Info, event: Any, signature: str, signer: str) -> ActResult:
    """`submitEvent(event, signature, signer)`: a client-signed envelope, as is.

    The answer embeds the instance, so it passes the read rule for every principal of
    the call: the envelope's actor when it signed the envelope itself (its signature is
    the credential) and the bearer viewer when there is one; a call with neither (a
    server-attested envelope re-sent anonymously) reads nothing. Otherwise NOT_FOUND, as
    for `instance(id)`.
    """
    signed = parse_signed({"event": event, "signature": signature, "signer": signer})
    rt = runtime(info)
    return await _answer(info, signed, await act(rt, signed, attested=False))


async def submit_events(
    info: Info, items: list[dict[str, Any]]
) -> list[tuple[ActResult | None, Problem | None]]:
    """`submitEvents(events)`: each item as `submitEvent` would take it, applied in order
    in one group-commit batch, each all-or-nothing on its own. Per item: (result, None),
    or (None, the problem: code, message, pointer under `/events/<n>`)."""
    if len(items) > MAX_SUBMIT_EVENTS:
        raise DomainError(
            INVALID_INPUT, f"at most {MAX_SUBMIT_EVENTS} events per request", pointer="/events"
        )
    rt = runtime(info)
    answers: list[tuple[ActResult | None, Problem | None]] = [(None, None)] * len(items)
    parsed: list[tuple[int, SignedEnvelope]] = []
    for n, item in enumerate(items):
        try:
            parsed.append((n, parse_signed(item)))
        except DomainError as error:
            answers[n] = (None, _problem(n, error))
    outcomes = await act_many(rt, [signed for _, signed in parsed], attested=False)
    # Every item is committed by now: one role read per signing actor and namespace
    # serves them all (it was one read per item, 100 round trips for 100 items).
    roles: dict[tuple[str, str], frozenset[str] | None] = {}
    for (n, signed), outcome in zip(parsed, outcomes, strict=True):
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            answers[n] = (await _answer(info, signed, outcome, roles), None)
        except DomainError as error:
            answers[n] = (None, _problem(n, error))
        except Exception:  # a bug: the others keep their answers, this one is masked
            log.exception("submitEvents item %d failed", n)
            answers[n] = (None, Problem(INTERNAL_ERROR, MASKED_MESSAGE, f"/events/{n}"))
    return answers


def _problem(n: int, error: DomainError) -> Problem:
    return Problem(error.code, clip(error.message), f"/events/{n}{error.pointer}")


async def _answer(
    info: Info,
    signed: SignedEnvelope,
    result: ActResult,
    roles: dict[tuple[str, str], frozenset[str] | None] | None = None,
) -> ActResult:
    """`result` when every principal of the call may read its process (see
    `submit_event`); else NOT_FOUND. The signing actor's roles in the process's namespace
    (None: its key is revoked or rotated) as the group committer found them at the
    event's commit (`ActResult.actor_roles`), else read after the commit through the
    runtime's grant cache; `roles`: those this request already read (by actor and
    namespace, all after its commits)."""
    rt = runtime(info)
    record = result.record
    allowed: list[bool] = []
    actor = signed.envelope.actor
    if signed.signer == actor and is_public_key(actor):
        key = (actor, record.namespace)
        known = result.actor_roles
        if known is not None and (known.actor, known.namespace) == key:
            held = known.roles
        elif roles is None or key not in roles:
            held = await current_roles(rt, actor, record.namespace)
            if roles is not None:
                roles[key] = held
        else:
            held = roles[key]
        allowed.append(bool(held))  # the read rule: a role in the namespace or above
    if viewer_or_none(info) is not None:
        allowed.append(policy.visible_process(viewer_or_none(info), record))
    if not allowed or not all(allowed):
        raise policy.not_found("instance")
    return result


def _readable(info: Info, result: ActResult) -> ActResult:
    """`result` when the viewer may read the process it embeds; else NOT_FOUND."""
    policy.readable_process(viewer(info), result.record, kind=None)
    return result


def deployed_version(result: ActResult) -> int | None:
    """The version a deployment event created (from its `workflow.deployed` message)."""
    for row in result.outbox:
        if row.type == ev.WORKFLOW_DEPLOYED and isinstance(row.payload.get("version"), int):
            return int(row.payload["version"])
    return None


async def _deployed(info: Info, path: str, result: ActResult) -> DeployedWorkflow:
    found = await registry.get_workflow(runtime(info), path, deployed_version(result))
    if found is None:
        raise DomainError(NOT_FOUND, f"workflow {path} was not stored")
    return found


def _path_of(definition: dict[str, Any]) -> str:
    return str(definition.get("$path", ""))


async def add_workflow(info: Info, definition: Any) -> DeployedWorkflow:
    """`addWorkflow(definition)`: version 1 of a new path."""
    source = _object(definition, "definition")
    result = await registry.deploy_workflow(runtime(info), viewer(info).actor, source)
    return await _deployed(info, _path_of(source), result)


async def update_workflow(info: Info, definition: Any) -> DeployedWorkflow:
    """`updateWorkflow(definition)`: the next version of an existing path; the latest
    version itself, with no event, when nothing changed (same hash)."""
    source = _object(definition, "definition")
    same = await registry.unchanged_latest(runtime(info), viewer(info).actor, source)
    if same is not None:
        return same
    result = await registry.update_workflow(runtime(info), viewer(info).actor, source)
    return await _deployed(info, _path_of(source), result)


async def remove_workflow(info: Info, path: str) -> bool:
    """`removeWorkflow(path)`."""
    await registry.remove_workflow(runtime(info), viewer(info).actor, path)
    return True


async def _registry(info: Info, namespace: str) -> RegistryFacts:
    require_read(info, namespace, "registry")
    return await queries.registry_facts(runtime(info), namespace, registry_id(namespace))


async def add_module(info: Info, namespace: str, name: str, source: str) -> RegistryFacts:
    """`addModule(namespace, name, source)`."""
    await registry.add_module(runtime(info), viewer(info).actor, namespace, name, source)
    return await _registry(info, namespace)


async def update_module(info: Info, namespace: str, name: str, source: str) -> RegistryFacts:
    """`updateModule(namespace, name, source)`."""
    await registry.update_module(runtime(info), viewer(info).actor, namespace, name, source)
    return await _registry(info, namespace)


async def grant_role(info: Info, namespace: str, actor: str, roles: list[str]) -> RegistryFacts:
    """`grantRole(namespace, actor, roles)`."""
    await registry.grant_role(runtime(info), viewer(info).actor, namespace, actor, roles)
    return await _registry(info, namespace)


async def revoke_role(info: Info, namespace: str, actor: str, roles: list[str]) -> RegistryFacts:
    """`revokeRole(namespace, actor, roles)`."""
    await registry.revoke_role(runtime(info), viewer(info).actor, namespace, actor, roles)
    return await _registry(info, namespace)


async def set_webhook(
    info: Info,
    namespace: str,
    url: str | None,
    secret: str | None,
    workflow: str | None = None,
    surface: str | None = None,
) -> RegistryFacts:
    """`setWebhook(namespace, url, secret, workflow, surface)`: a `set_webhook` registry
    event (admin only); a null `url` removes the webhook; `workflow` sets that workflow's
    own, `surface` that delegated surface's."""
    await registry.set_webhook(
        runtime(info), viewer(info).actor, namespace, url, secret, workflow, surface
    )
    return await _registry(info, namespace)


async def grant_reference(
    info: Info, namespace: str, to: str, module: str | None, grant: bool
) -> RegistryFacts:
    """`allowSpawn` / `disallowSpawn` (module None) or `shareModule` / `unshareModule`."""
    actor = viewer(info).actor
    if module is None:
        await references.allow_spawn(runtime(info), actor, namespace, to, grant)
    else:
        await references.share_module(runtime(info), actor, namespace, module, to, grant)
    return await _registry(info, namespace)


async def start_instance(
    info: Info, workflow: str, data: Any, ident: str | None, metadata: Any = None
) -> ProcessRecord:
    """`startInstance(workflow, data, id, metadata)`."""
    pid = local_id(ident, "Instance") if ident else None
    me = viewer(info)
    await _check_start(info, me, workflow)
    result = await commands.start_instance(
        runtime(info), me.actor, workflow, _object(data, "data"), pid,
        metadata=_object(metadata, "metadata"),
    )  # fmt: skip
    return _readable(info, result).record


async def _check_start(info: Info, me: auth.Viewer, workflow: str) -> None:
    """A caller with no role in the workflow's namespace cannot read what it would start:
    NOT_FOUND (as for a missing workflow), or FORBIDDEN pointing to `startPublic` when
    the initial state is public (the visitor view is what such a caller may read)."""
    namespace = workflow.rpartition("/")[0]
    if policy.can_read(me, namespace):
        return
    found = await registry.get_workflow(runtime(info), workflow) if namespace else None
    definition = found.definition if found is not None and not found.removed else None
    if definition is None or definition.states[definition.initial].audience != "public":
        raise DomainError(NOT_FOUND, f"workflow {workflow} is not deployed")
    raise DomainError(FORBIDDEN, "you hold no role in this namespace: start it with startPublic")


async def perform_action(info: Info, instance: str, action: str, input: Any) -> ActResult:
    """`performAction(instance, action, input)`."""
    result = await commands.perform_action(
        runtime(info), viewer(info).actor, local_id(instance, "Instance"), action,
        _object(input, "input"),
    )  # fmt: skip
    return _readable(info, result)


async def advance(info: Info, instance: str, input: Any) -> ActResult:
    """`advance(instance, input)`: the first applicable action out of the current state."""
    result = await commands.advance_instance(
        runtime(info), viewer(info).actor, local_id(instance, "Instance"), _object(input, "input")
    )
    return _readable(info, result)


async def cancel_instance(info: Info, instance: str, reason: str | None) -> ActResult:
    """`cancelInstance(instance, reason)`."""
    result = await commands.cancel_instance(
        runtime(info), viewer(info).actor, local_id(instance, "Instance"), reason
    )
    return _readable(info, result)


async def rotate_key(info: Info, new_key: str) -> ActResult:
    """`rotateKey(newKey)`: the viewer's key hands its grants to `newKey` and signs
    nothing more (a `rotate_key` event of the system registry, attested for the viewer)."""
    result = await registry.rotate_key(runtime(info), viewer(info).actor, new_key)
    _forget_viewers(info)
    return result


async def revoke_key(info: Info, key: str) -> ActResult:
    """`revokeKey(key)` (system admins): events signed by `key` from now on are refused."""
    result = await registry.revoke_key(runtime(info), viewer(info).actor, key)
    _forget_viewers(info)
    return result
