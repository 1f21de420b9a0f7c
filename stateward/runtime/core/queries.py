"""Read services for the API: instance listings, event pages, registry facts.

Everything here is read-only and keyset-paged; callers pass what the viewer may see
(`namespaces`) and these functions never widen it. Registry writes and workflow reads
live in `registry.py`; this module only adds the listings the GraphQL API needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stateward.domain.errors import DomainError
from stateward.domain.search import AssignmentSearch, AuditSearch, InstanceSearch, Ordering
from stateward.persistence.retry import read_retrying, unavailable
from stateward.records import (
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


@dataclass(frozen=True)
class SearchPage:
    """Rows of one page of a search, each with its keyset position (sort value, id)."""

    rows: list[ProcessRecord]
    positions: list[tuple[Any, str]]


async def search_instances(
    runtime: Runtime,
    search: InstanceSearch,
    *,
    namespaces: Sequence[str] | None,
    order: Ordering = Ordering(),
    position: tuple[Any, str] | None = None,
    backward: bool = False,
    limit: int = 50,
) -> SearchPage:
    """Instances matching `search` in `order`, keyset-paged after `position` (in the
    mirrored order when `backward`; the rows then come back in that mirrored order).

    `namespaces` limits the search to those namespaces (None = every namespace, for
    admins of `system`); one SQL statement, so a viewer never sees another tenant's rows.
    """
    async with runtime.uow(readonly=True) as uow:
        found = await uow.search.instances(
            search, namespaces=namespaces, order=order, position=position,
            backward=backward, limit=limit,
        )  # fmt: skip
    return SearchPage([r for r, _ in found], [(v, r.id) for r, v in found])


async def count_instances(
    runtime: Runtime, search: InstanceSearch, *, namespaces: Sequence[str] | None
) -> int:
    """How many instances match `search` within `namespaces` (None = every namespace)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.search.count_instances(search, namespaces=namespaces)


async def matching_instance_ids(
    runtime: Runtime, search: InstanceSearch, *, namespaces: Sequence[str] | None,
    limit: int,
) -> list[str]:  # fmt: skip
    """Ids of up to `limit` instances matching `search`, oldest first (bulk operations)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.search.instance_ids(search, namespaces=namespaces, limit=limit)


async def instance_counts(
    runtime: Runtime, search: InstanceSearch, groups: Sequence[str], *,
    namespaces: Sequence[str] | None,
) -> list[tuple[dict[str, Any], int]]:  # fmt: skip
    """Counts of the instances matching `search` by `groups` (GROUP BY in SQL)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.counts.instance_counts(search, groups, namespaces=namespaces)


async def assignment_counts(
    runtime: Runtime, search: AssignmentSearch, groups: Sequence[str], *,
    namespaces: Sequence[str] | None,
) -> list[tuple[dict[str, Any], int]]:  # fmt: skip
    """Counts of the assignments matching `search` by `groups` (GROUP BY in SQL)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.counts.assignment_counts(search, groups, namespaces=namespaces)


async def audit_events(
    runtime: Runtime, search: AuditSearch, *, namespaces: Sequence[str] | None,
    descending: bool, position: tuple[Any, int] | None, backward: bool, limit: int,
) -> list[StoredEvent]:  # fmt: skip
    """A page of the audit log (`namespaces`: what the viewer may read; None = all)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.audit.events(
            search, namespaces=namespaces, descending=descending, position=position,
            backward=backward, limit=limit,
        )  # fmt: skip


async def count_audit_events(
    runtime: Runtime, search: AuditSearch, *, namespaces: Sequence[str] | None
) -> int:
    """How many events of the audit log match."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.audit.count(search, namespaces=namespaces)


async def instance_namespaces(runtime: Runtime) -> list[str]:
    """Namespaces that may hold instances: those with workflows or a registry, sorted."""
    async with runtime.uow(readonly=True) as uow:
        found = set(await uow.workflows.namespaces())
        found.update(await uow.processes.registry_namespaces())
    return sorted(found)


async def get_process(runtime: Runtime, process_id: str) -> ProcessRecord | None:
    """The process `process_id` (instance or registry), or None. A transient database
    fault is retried (the read is idempotent); a lasting one is UNAVAILABLE."""

    async def read() -> ProcessRecord | None:
        async with runtime.uow(readonly=True) as uow:
            return await uow.processes.get(process_id)

    return await read_retrying(read, what="process read")


async def process_events(
    runtime: Runtime, process_id: str, *, after_seq: int = 0, limit: int = 50,
    before_seq: int | None = None,
) -> list[StoredEvent]:  # fmt: skip
    """Events of `process_id` with seq > `after_seq`, in seq order (with `before_seq`: the
    last `limit` below it, in seq order)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.events.for_process(
            process_id, after_seq=after_seq, limit=limit, before_seq=before_seq
        )


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
    """Outbox rows after `cursor` matching `where`, in cursor order (subscription resume).
    A transient database fault is retried; a lasting one is UNAVAILABLE."""

    async def read() -> list[OutboxRecord]:
        async with runtime.uow(readonly=True) as uow:
            return await uow.outbox.events_after(cursor, where, limit)

    return await read_retrying(
        read, what="subscription replay", advice="resume with `after` the last cursor you received"
    )


def unavailable_refusal(error: BaseException) -> DomainError | None:
    """The `UNAVAILABLE` refusal for a transient database fault (a dropped or killed
    connection, a failover) that reached the API from a read with no retry of its own:
    the client is told to try again, not `INTERNAL_ERROR`; None for any other error."""
    return unavailable(error)
