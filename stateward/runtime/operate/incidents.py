"""Incidents (issue 15): the `$retry` / `$resolve` kernel operations and their services.

The incident rows are kept by the core write path (`core.incidents`); this module lets an
operator end them, each time with ONE signed event through `act` (server-attested for the
caller), so `verify` replays it:

- `retry_incident(id)`: a `$retry {incident, hook, module}` event. `module` is the hook's
  module deployed NOW in the namespace (namespace, name, version, hash): deploying a fixed
  module and retrying is how an operator repairs a failing hook, and the event says which
  module that was. The instance becomes `active`, the hook runs again after the commit
  (its `$automate` records the module it really ran); a new failure counts one more
  attempt on the same incident, a success resolves it.
- `resolve_incident(id, action, input)`: a `$resolve` event that cancels (`$cancel`) or
  performs the operator's business action instead.

By kind: a TIMER_FAILED incident's retry is `$retry {incident, timer: {schedule, action,
key?}}` (the timer of the failing `$timer` event), performed in that event: success moves
the instance on and resolves it, a new failure counts an attempt. A WEBHOOK_EXHAUSTED
incident's retry is `$retry {incident, delivery}`: its transaction re-queues the delivery
(attempts 0, due now), and the delivery's success resolves the incident; its resolve is
`$cancel` only (the delivery is given up, the instance is untouched). `bulkRetry` builds
the same input per instance (`retry_input`), so its events record the module too.

Who: `admin` or `operator` in the instance's namespace (`roles.py`), checked inside the
operation (a client-signed event is held to the same rule). An incident whose instance
the caller may not read is NOT_FOUND, never FORBIDDEN: other tenants' incidents do not
exist for it. Listing is limited to the namespaces where the caller may operate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from stateward.domain.access import ADMIN_ROLE, holds_operation_role, may_read
from stateward.domain.errors import (
    CONFLICT,
    INACTIVE_PROCESS,
    INVALID_INPUT,
    NOT_FOUND,
    DomainError,
)
from stateward.domain.hookrouting import waiting_hooks
from stateward.domain.incidents import (
    CANCEL_ACTION,
    KINDS,
    RESOLVE,
    RETRY,
    TIMER_FAILED,
    retry_hook,
)
from stateward.domain.model import ERROR, Outcome, ProcessSnapshot
from stateward.persistence import UnitOfWork
from stateward.persistence.incidents import IncidentQuery
from stateward.records import INSTANCE, IncidentRecord, ProcessRecord
from stateward.runtime.core import queries
from stateward.runtime.core.act import ActResult, act, actor_in
from stateward.runtime.core.commands import attest
from stateward.runtime.core.kernel import ActContext, apply_engine
from stateward.runtime.core.ops_support import require_instance
from stateward.runtime.core.references import may_use_module
from stateward.runtime.core.services import Runtime
from stateward.runtime.hooks.module import HookRef, parse_hook_ref
from stateward.runtime.operate.roles import may_operate, require_operator

__all__ = [
    "RESOLVE",
    "RETRY",
    "IncidentPage",
    "list_incidents",
    "op_resolve",
    "op_retry",
    "resolve_incident",
    "retry_incident",
    "retry_input",
]

_RETRY_KEYS = frozenset({"incident", "hook", "module", "timer", "delivery"})
_RESOLVE_KEYS = frozenset({"incident", "action", "input", "reason", "delivery"})
#: The most incidents one page returns.
MAX_PAGE = 500


@dataclass(frozen=True)
class IncidentPage:
    """One page of `incidents(filter)`: the rows and whether more follow."""

    items: list[IncidentRecord]
    has_next: bool


def _check_keys(input: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(input) - allowed)
    if unknown:
        raise DomainError(
            INVALID_INPUT, f"{what} input has no field {unknown[0]!r}", pointer=f"/{unknown[0]}"
        )


async def _check_incident(ctx: ActContext, process: ProcessRecord) -> None:
    """The input's `incident`, when named, is the instance's open incident."""
    named = ctx.input.get("incident")
    if named is None:
        return
    delivery = ctx.input.get("delivery")
    if isinstance(delivery, int) and not isinstance(delivery, bool):
        current = await ctx.uow.incidents.open_for_delivery(delivery)
    else:
        current = await ctx.uow.incidents.open_for(process.id)
    if not isinstance(named, str) or current is None or current.id != named:
        raise DomainError(
            CONFLICT, f"incident {named!r} is not the open incident of {process.id}",
            pointer="/incident",
        )  # fmt: skip


async def current_module(
    uow: UnitOfWork, process: ProcessRecord, hook: str
) -> dict[str, Any] | None:
    """The module `hook` would run now for `process` ({namespace, name, version, hash}),
    None when it is not deployed (or no longer shared with the namespace)."""
    ref = parse_hook_ref(hook)
    if not isinstance(ref, HookRef):
        return None
    owner = ref.namespace or process.namespace
    if not await may_use_module(uow, process.namespace, owner, ref.module):
        return None
    module = await uow.modules.get(owner, ref.module)
    if module is None:
        return None
    return {"namespace": module.namespace, "name": module.name, "version": module.version,
            "hash": module.hash}  # fmt: skip


async def op_retry(ctx: ActContext) -> Outcome:
    """`$retry {incident?, hook?, module?}` (admin or operator): the instance in `error`
    becomes active and its hook runs again. A `module` that is no longer the deployed one
    is a CONFLICT (a deploy raced the retry: read the incident again)."""
    require_operator(ctx.actor, "retryIncident")
    process = require_instance(ctx)
    _check_keys(ctx.input, _RETRY_KEYS, RETRY)
    await _check_incident(ctx, process)
    if "delivery" in ctx.input:
        outcome = apply_engine(ctx)  # checks the delivery id
        await _requeue(ctx, process, ctx.input["delivery"])
        return outcome
    module = ctx.input.get("module")
    if module is not None:
        if not isinstance(module, Mapping):
            raise DomainError(INVALID_INPUT, "module must be an object", pointer="/module")
        hook = retry_hook(ctx.definition, process.snapshot(), ctx.input.get("hook"))
        if await current_module(ctx.uow, process, hook) != dict(module):
            raise DomainError(CONFLICT, f"the module of hook {hook} changed; retry again",
                              pointer="/module")  # fmt: skip
    return apply_engine(ctx)


async def op_resolve(ctx: ActContext) -> Outcome:
    """`$resolve {incident?, action, input?, reason?}` (admin or operator): cancel the
    instance in `error` (`$cancel`) or perform a business action instead."""
    require_operator(ctx.actor, "resolveIncident")
    process = require_instance(ctx)
    _check_keys(ctx.input, _RESOLVE_KEYS, RESOLVE)
    await _check_incident(ctx, process)
    outcome = apply_engine(ctx)
    if "delivery" in ctx.input:
        await _own_delivery(ctx, process, ctx.input["delivery"])
    return outcome


async def _own_delivery(ctx: ActContext, process: ProcessRecord, delivery_id: int) -> None:
    """NOT_FOUND unless the delivery was queued by this instance."""
    delivery = await ctx.uow.webhooks.delivery(delivery_id)
    if delivery is None or delivery.process_id != process.id:
        raise DomainError(NOT_FOUND, f"webhook delivery {delivery_id} of {process.id} "
                          "does not exist", pointer="/delivery")  # fmt: skip


async def _requeue(ctx: ActContext, process: ProcessRecord, delivery_id: int) -> None:
    """The failed delivery again: attempts 0, due now (CONFLICT unless it is failed)."""
    await _own_delivery(ctx, process, delivery_id)
    if not await ctx.uow.webhooks.requeue(delivery_id, ctx.now):
        raise DomainError(CONFLICT, f"webhook delivery {delivery_id} is not failed: a retry "
                          "is under way", pointer="/delivery")  # fmt: skip


async def _visible(
    runtime: Runtime, uow: UnitOfWork, actor: str, incident_id: str
) -> tuple[IncidentRecord, ProcessRecord]:
    """The incident and its instance, NOT_FOUND unless `actor` may read the instance,
    FORBIDDEN unless it may operate it."""
    missing = DomainError(NOT_FOUND, f"incident {incident_id} does not exist")
    incident = await uow.incidents.get(incident_id)
    if incident is None:
        raise missing
    process = await uow.processes.get(incident.process_id)
    if process is None or process.kind != INSTANCE:
        raise missing
    who = await actor_in(uow, actor, process.namespace)
    if not may_operate(who) and not may_read(
        who, entry_token_hash=process.entry_token_hash, started_by=process.started_by
    ):
        raise missing
    require_operator(who, "an incident")
    if incident.resolved:
        raise DomainError(CONFLICT, f"incident {incident_id} is already resolved")
    if incident.delivery_id is None and process.status != ERROR:
        raise DomainError(
            CONFLICT, f"instance {process.id} is {process.status}: a retry is under way"
        )
    return incident, process


async def retry_incident(runtime: Runtime, actor: str, incident_id: str) -> ActResult:
    """Retry an open incident as `actor` (see the module docstring)."""
    async with runtime.uow(readonly=True) as uow:
        incident, process = await _visible(runtime, uow, actor, incident_id)
        input = await retry_input(runtime, uow, process, incident)
    signed = attest(runtime, actor, process.id, RETRY, process.workflow, input)
    return await act(runtime, signed, attested=True)


async def retry_input(
    runtime: Runtime, uow: UnitOfWork, process: ProcessRecord, incident: IncidentRecord | None
) -> dict[str, Any]:
    """The `$retry` input for `incident` (else the instance's open incident, when it has
    one): the delivery of a webhook incident, the timer of a TIMER_FAILED one, else the
    hook to re-run with the module deployed NOW (see the module docstring). An instance
    not in `error` without a webhook incident is INACTIVE_PROCESS."""
    if incident is None and process.status == ERROR:
        incident = await uow.incidents.open_for(process.id)
    if incident is not None and incident.delivery_id is not None:
        return {"incident": incident.id, "delivery": incident.delivery_id}
    if process.status != ERROR:
        raise DomainError(INACTIVE_PROCESS, f"process {process.id} is {process.status}, "
                          "not in error")  # fmt: skip
    input: dict[str, Any] = {} if incident is None else {"incident": incident.id}
    if incident is not None and incident.kind == TIMER_FAILED:
        timer = await _failed_timer(uow, process, incident)
        if timer is not None:
            return {**input, "timer": timer}
    definition = await runtime.definition(uow, process.workflow, process.workflow_version)
    hook = _failed_hook(definition, process.snapshot(), await _last_input(uow, process))
    input["hook"] = hook
    module = await current_module(uow, process, hook)
    if module is not None:
        input["module"] = module
    return input


async def _failed_timer(
    uow: UnitOfWork, process: ProcessRecord, incident: IncidentRecord
) -> dict[str, Any] | None:
    """The timer whose failure opened `incident` (from its `$timer {failed}` event)."""
    opened = await uow.events.get(process.id, incident.opened_seq)
    given = opened.input if opened is not None and isinstance(opened.input, dict) else {}
    if "failed" not in given or not isinstance(given.get("action"), str):
        return None
    return {k: given[k] for k in ("schedule", "action", "key", "input") if k in given}


async def resolve_incident(
    runtime: Runtime,
    actor: str,
    incident_id: str,
    action: str,
    input: Mapping[str, Any] | None = None,
) -> ActResult:
    """Resolve an open incident as `actor`: `$cancel` it or perform `action` with `input`."""
    if not isinstance(action, str) or not action:
        raise DomainError(INVALID_INPUT, "action must be an action name or $cancel",
                          pointer="/action")  # fmt: skip
    async with runtime.uow(readonly=True) as uow:
        incident, process = await _visible(runtime, uow, actor, incident_id)
    body: dict[str, Any] = {"incident": incident.id, "action": action}
    if incident.delivery_id is not None:
        body["delivery"] = incident.delivery_id
    if input:
        if action == CANCEL_ACTION:
            raise DomainError(INVALID_INPUT, "$cancel takes no input", pointer="/input")
        body["input"] = dict(input)
    signed = attest(runtime, actor, process.id, RESOLVE, process.workflow, body)
    return await act(runtime, signed, attested=True)


async def _last_input(uow: UnitOfWork, process: ProcessRecord) -> Mapping[str, Any]:
    last = await uow.events.get(process.id, process.seq)
    return last.input if last is not None and isinstance(last.input, dict) else {}


def _failed_hook(definition: Any, snapshot: ProcessSnapshot, last: Mapping[str, Any]) -> str:
    """The hook whose failure stopped the instance (the failing `$automate` names it),
    else the state's own hook."""
    hook = last.get("hook")
    state = definition.states.get(snapshot.state)
    if isinstance(hook, str) and hook in waiting_hooks(state):
        return hook
    return retry_hook(definition, snapshot, None)


async def get_incident(runtime: Runtime, actor: str, incident_id: str) -> IncidentRecord | None:
    """One incident, None unless `actor` may operate its instance's namespace."""
    async with runtime.uow(readonly=True) as uow:
        incident = await uow.incidents.get(incident_id)
        if incident is None:
            return None
        who = await actor_in(uow, actor, incident.namespace)
    return incident if may_operate(who) else None


def check_kinds(kinds: Any) -> tuple[str, ...]:
    """The filter's kinds, each one of `KINDS` (INVALID_INPUT /filter/kind otherwise)."""
    out = tuple(kinds or ())
    for kind in out:
        if kind not in KINDS:
            raise DomainError(INVALID_INPUT, f"unknown incident kind {kind!r}",
                              pointer="/filter/kind")  # fmt: skip
    return out


async def list_incidents(
    runtime: Runtime,
    namespaces: list[str] | None,
    query: IncidentQuery,
    first: int,
    after: tuple[datetime, str] | None,
    backward: bool = False,
) -> IncidentPage:
    """A page of incidents newest first, limited to `namespaces` (None: all; the caller's
    operable namespaces, see `batches.bulk.operable_namespaces`). `backward`: the ones
    newer than `after`, oldest first (`has_next`: more of them), to page backward."""
    if first < 0 or first > MAX_PAGE:
        raise DomainError(INVALID_INPUT, f"first must be 0..{MAX_PAGE}", pointer="/first")
    scoped = IncidentQuery(
        namespaces=namespaces, namespace=query.namespace, workflow=query.workflow,
        kinds=check_kinds(query.kinds), resolved=query.resolved, process_id=query.process_id,
    )  # fmt: skip
    async with runtime.uow(readonly=True) as uow:
        rows = await uow.incidents.page(scoped, first + 1, after, backward)
    return IncidentPage(rows[:first], len(rows) > first)


async def operable_namespaces(runtime: Runtime, actor: str) -> list[str] | None:
    """The namespaces whose incidents `actor` sees: None (all) for a system admin, else
    every namespace holding instances where it holds admin or operator (maybe none)."""
    namespaces = await queries.instance_namespaces(runtime)
    async with runtime.uow(readonly=True) as uow:
        if ADMIN_ROLE in {r.lower() for r in await uow.grants.roles_of(actor, "system")}:
            return None
        return [
            namespace
            for namespace in namespaces
            if holds_operation_role(await uow.grants.roles_of(actor, namespace))
        ]


async def incidents_for(
    runtime: Runtime,
    actor: str,
    query: IncidentQuery,
    first: int,
    after: tuple[datetime, str] | None,
    backward: bool = False,
) -> IncidentPage:
    """`incidents(filter)` for `actor`: only its operable namespaces, whatever the filter."""
    return await list_incidents(
        runtime, await operable_namespaces(runtime, actor), query, first, after, backward
    )


async def count_incidents_for(runtime: Runtime, actor: str, query: IncidentQuery) -> int:
    """How many incidents `incidents(filter)` selects for `actor` (its `totalCount`)."""
    scoped = IncidentQuery(
        namespaces=await operable_namespaces(runtime, actor), namespace=query.namespace,
        workflow=query.workflow, kinds=check_kinds(query.kinds), resolved=query.resolved,
        process_id=query.process_id,
    )  # fmt: skip
    async with runtime.uow(readonly=True) as uow:
        return await uow.incidents.count(scoped)


async def open_counts(runtime: Runtime) -> dict[str, int]:
    """Open incidents by namespace (the Prometheus gauge, set by the ticker)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.incidents.open_by_namespace()
