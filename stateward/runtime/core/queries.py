"""Read services for the API: instance listings, event pages, registry facts.

Everything here is read-only and keyset-paged; callers pass what the viewer may see
(`namespaces`) and these functions never widen it. Registry writes and workflow reads
live in `registry.py`; this module only adds the listings the GraphQL API needs.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from stateward.persistence.processes import ProcessFilter
from stateward.records import (
    INSTANCE,
    AssignmentRecord,
    GrantRecord,
    ModuleRecord,
    NotificationRecord,
    OutboxFilter,
    OutboxRecord,
    ProcessRecord,
    StoredEvent,
    WorkflowVersionRecord,
)
from stateward.runtime.core.services import Runtime

Keyset = tuple[datetime, str]


@dataclass(frozen=True)
class InstanceQuery:
    """Which instances to list (None = any)."""

    namespace: str | None = None
    workflow: str | None = None
    state: str | None = None
    status: str | None = None
    parent: str | None = None


async def list_instances(
    runtime: Runtime,
    query: InstanceQuery,
    *,
    namespaces: Sequence[str] | None,
    after: Keyset | None = None,
    limit: int = 50,
) -> list[ProcessRecord]:
    """Instances matching `query`, oldest first, keyset-paged after (created_at, id).

    `namespaces` limits the listing to those namespaces (None = every namespace); it is
    one query per namespace, merged in order, so a viewer never sees another tenant's rows.
    """
    base = ProcessFilter(
        namespace=query.namespace, workflow=query.workflow, state=query.state,
        status=query.status, parent_id=query.parent, kind=INSTANCE,
    )  # fmt: skip
    async with runtime.uow(readonly=True) as uow:
        if namespaces is None:
            return await uow.processes.find(base, after=after, limit=limit)
        pages = [
            await uow.processes.find(replace(base, namespace=ns), after=after, limit=limit)
            for ns in namespaces
        ]
    merged = heapq.merge(*pages, key=lambda p: (p.created_at, p.id))
    return list(merged)[:limit]


async def instance_namespaces(runtime: Runtime) -> list[str]:
    """Namespaces that may hold instances: those with workflows or a registry, sorted."""
    async with runtime.uow(readonly=True) as uow:
        found = set(await uow.workflows.namespaces())
        found.update(await uow.processes.registry_namespaces())
    return sorted(found)


async def get_process(runtime: Runtime, process_id: str) -> ProcessRecord | None:
    """The process `process_id` (instance or registry), or None."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.processes.get(process_id)


async def process_events(
    runtime: Runtime, process_id: str, *, after_seq: int = 0, limit: int = 50
) -> list[StoredEvent]:
    """Events of `process_id` with seq > `after_seq`, in seq order."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.events.for_process(process_id, after_seq=after_seq, limit=limit)


async def workflow_versions(runtime: Runtime, path: str) -> list[WorkflowVersionRecord]:
    """Every stored version of `path`, oldest first."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.workflows.versions(path)


@dataclass(frozen=True)
class RegistryFacts:
    """What a namespace's registry holds besides its workflows."""

    namespace: str
    process: ProcessRecord | None
    members: list[GrantRecord]
    modules: list[ModuleRecord]


async def registry_facts(runtime: Runtime, namespace: str, registry_id: str) -> RegistryFacts:
    """The registry process, role grants (made in this namespace) and latest modules."""
    async with runtime.uow(readonly=True) as uow:
        process = await uow.processes.get(registry_id)
        members = await uow.grants.members(namespace)
        modules = await uow.modules.latest_in(namespace)
    return RegistryFacts(namespace, process, members, modules)


async def get_assignment_record(runtime: Runtime, assignment_id: str) -> AssignmentRecord | None:
    """The assignment `assignment_id`, or None."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.assignments.get(assignment_id)


async def event_at(runtime: Runtime, process_id: str, seq: int) -> StoredEvent | None:
    """Event `seq` of `process_id`, or None."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.events.get(process_id, seq)


async def notification_by_id(runtime: Runtime, ident: int) -> NotificationRecord | None:
    """The notification `ident`, or None (whose it is: `policy.can_read_notification`)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.notifications.get(ident)


async def outbox_after(
    runtime: Runtime, cursor: int, where: OutboxFilter, limit: int = 500
) -> list[OutboxRecord]:
    """Outbox rows after `cursor` matching `where`, in cursor order (subscription resume)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.outbox.events_after(cursor, where, limit)
