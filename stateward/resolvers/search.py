"""Search resolvers (issue 16): instances by filter and order, paged both ways, counted.

`visible_namespaces` is the one place that turns a search and a viewer into the
namespaces SQL may look at; bulk operations over a filter use it too, so a filter never
reaches further than a listing with the same filter would.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from datetime import datetime
from typing import Any

from strawberry.types import Info

from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.paths import is_canonical_path, split_path
from stateward.domain.search import (
    ASSIGNMENT_GROUPS,
    INSTANCE_GROUPS,
    AssignmentSearch,
    AuditSearch,
    InstanceSearch,
    Ordering,
    check_groups,
)
from stateward.records import AssignmentRecord, ProcessRecord, StoredEvent
from stateward.resolvers.context import require_read, runtime, viewer
from stateward.resolvers.ids import local_id
from stateward.resolvers.loaders import loaders
from stateward.resolvers.paging import Page, Window, keyset_page
from stateward.runtime.core import queries
from stateward.runtime.core.policy import not_found


def resolve_ids(search: InstanceSearch) -> InstanceSearch:
    """`search` with its `parent` as a UUID (node ids are accepted too)."""
    if search.parent is None:
        return search
    return replace(search, parent=local_id(search.parent, "Instance"))


async def visible_namespaces(info: Info, search: InstanceSearch) -> list[str] | None:
    """The namespaces `search` may look into for the viewer (None: every one, for admins
    of `system`). A namespace or workflow the viewer may not read is NOT_FOUND."""
    me = viewer(info)
    scope = search.namespace
    if search.workflow is not None:
        if not is_canonical_path(search.workflow):
            raise DomainError(INVALID_INPUT, f"{search.workflow!r} is not a canonical workflow "
                              "path", pointer="/filter/workflow")  # fmt: skip
        workflow_namespace = split_path(search.workflow)[0]
        if scope is not None and scope != workflow_namespace:
            raise not_found("namespace")
        scope = workflow_namespace
    if scope is not None:
        require_read(info, scope, "namespace")
        return [scope]
    if me.is_admin:
        return None
    return me.readable(await queries.instance_namespaces(runtime(info)))


async def instances(
    info: Info, search: InstanceSearch, order: Ordering, window: Window
) -> Page[ProcessRecord]:
    """`Query.instances(filter, orderBy, first, after, last, before)`; `totalCount` lazily."""
    search = resolve_ids(search)
    allowed = await visible_namespaces(info, search)
    rt = runtime(info)
    found = await queries.search_instances(
        rt, search, namespaces=allowed, order=order, position=window.position(order.tag),
        backward=window.backward, limit=window.limit + 1,
    )  # fmt: skip
    for row in found.rows:
        loaders(info).prime_process(row)

    async def total() -> int:
        return await queries.count_instances(rt, search, namespaces=allowed)

    return keyset_page(window, found.rows, found.positions, order.tag).counted(total)


async def instance_counts(
    info: Info, search: InstanceSearch, groups: tuple[str, ...]
) -> list[tuple[dict[str, Any], int]]:
    """`Query.instanceCounts(groupBy, filter)`: typed rows, visible instances only."""
    check_groups(groups, INSTANCE_GROUPS)
    search = resolve_ids(search)
    allowed = await visible_namespaces(info, search)
    return await queries.instance_counts(runtime(info), search, groups, namespaces=allowed)


async def assignment_counts(
    info: Info, search: AssignmentSearch, groups: tuple[str, ...]
) -> list[tuple[dict[str, Any], int]]:
    """`Query.assignmentCounts(groupBy, filter)`: assignments of visible instances."""
    check_groups(groups, ASSIGNMENT_GROUPS)
    if search.process is not None:
        search = replace(search, process=local_id(search.process, "Instance"))
    allowed = await visible_namespaces(info, InstanceSearch(namespace=search.namespace))
    return await queries.assignment_counts(runtime(info), search, groups, namespaces=allowed)


async def assignments(
    info: Info, search: AssignmentSearch, order: Ordering, window: Window
) -> Page[AssignmentRecord]:
    """`Query.assignments(filter, orderBy, first, after, last, before)`: the assignments
    the viewer may see (its teams' queues, any team where it is admin, its own claims and
    candidacies), paged both ways; `totalCount` lazily."""
    if search.process is not None:
        search = replace(search, process=local_id(search.process, "Instance"))
    me, rt = viewer(info), runtime(info)
    position = window.position(order.tag)
    if position is not None:
        position = (_assignment_sort_value(order, position[0], window), position[1])
    service = importlib.import_module("stateward.runtime.queues.assignments")
    rows, marks = await service.search_assignments(
        rt, me, search, order=order, position=position, backward=window.backward,
        limit=window.limit + 1,
    )  # fmt: skip

    async def total() -> int:
        return int(await service.count_search(rt, me, search))

    return keyset_page(window, rows, marks, order.tag).counted(total)


def _assignment_sort_value(order: Ordering, value: Any, window: Window) -> Any:
    """A cursor's sort value back in the type SQL compares; INVALID_INPUT otherwise."""
    if value is None and order.field != "CREATED":
        return None
    if order.field == "PRIORITY" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if order.field != "PRIORITY" and isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            when = None
        if when is not None and when.tzinfo is not None:
            return when
    raise DomainError(INVALID_INPUT, "invalid cursor",
                      pointer="/before" if window.backward else "/after")  # fmt: skip


async def audit_log(
    info: Info, search: AuditSearch, descending: bool, window: Window
) -> Page[StoredEvent]:
    """`Query.auditLog(filter, orderBy, first, after)`: every event of every process the
    viewer may read (registries included), newest first by default; `totalCount` lazily."""
    if search.process is not None:
        search = replace(search, process=local_id(search.process, "Instance"))
    # The readable namespaces include those holding only a registry (`instance_namespaces`).
    allowed = await visible_namespaces(info, InstanceSearch(namespace=search.namespace))
    tag = "AUDIT.DESC" if descending else "AUDIT.ASC"
    position = window.position(tag)
    rt = runtime(info)
    rows = await queries.audit_events(
        rt, search, namespaces=allowed, descending=descending,
        position=None if position is None else _audit_position(position, window),
        backward=window.backward, limit=window.limit + 1,
    )  # fmt: skip
    marks = [(e.recorded_at, str(e.id)) for e in rows]

    async def total() -> int:
        return await queries.count_audit_events(rt, search, namespaces=allowed)

    return keyset_page(window, rows, marks, tag).counted(total)


def _audit_position(position: tuple[Any, str], window: Window) -> tuple[Any, int]:
    recorded, ident = position
    try:
        when = datetime.fromisoformat(recorded) if isinstance(recorded, str) else None
        number = int(ident)
    except (TypeError, ValueError):
        when, number = None, 0
    if when is None or when.tzinfo is None:
        pointer = "/before" if window.backward else "/after"
        raise DomainError(INVALID_INPUT, "invalid cursor", pointer=pointer)
    return when, number
