"""Resolvers of incidents (issue 15): thin glue over `runtime.operate.incidents`.

The role rule (admin or operator of the instance's namespace) and the tenant scope of
the listing are the runtime's; these read the viewer, decode ids and cursors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strawberry.types import Info

from stateward.domain.errors import INVALID_INPUT, NOT_FOUND, DomainError
from stateward.records import IncidentRecord, ProcessRecord
from stateward.resolvers.context import runtime, viewer
from stateward.resolvers.ids import local_id
from stateward.resolvers.paging import Page, Window, encode_cursor, time_mark
from stateward.runtime.core.act import ActResult
from stateward.runtime.core.queries import get_process
from stateward.runtime.operate import incidents as ops
from stateward.runtime.operate.incidents import IncidentQuery


def _key(incident: IncidentRecord) -> list[Any]:
    return [incident.created_at.isoformat(), incident.id]


async def incidents(
    info: Info,
    namespace: str | None,
    workflow: str | None,
    kinds: Sequence[str],
    resolved: bool | None,
    instance: str | None,
    first: int | None,
    after: str | None,
    last: int | None = None,
    before: str | None = None,
) -> Page[IncidentRecord]:
    """`incidents(filter, first, after, last, before)`: newest first, in the viewer's
    operable namespaces, paged both ways (`before` pages to the newer ones)."""
    window = Window.of(first, after, last, before)
    limit = window.limit
    position = time_mark(window)
    query = IncidentQuery(
        namespace=namespace, workflow=workflow, kinds=tuple(kinds), resolved=resolved,
        process_id=local_id(instance, "Instance") if instance else None,
    )  # fmt: skip
    found = await ops.incidents_for(
        runtime(info), viewer(info).actor, query, limit, position, window.backward
    )
    items = found.items[::-1] if window.backward else found.items
    cursors = [encode_cursor(_key(i)) for i in items]
    rt, actor = runtime(info), viewer(info).actor

    async def total() -> int:
        return await ops.count_incidents_for(rt, actor, query)

    if window.backward:
        return Page(items, cursors, position is not None, found.has_next, total)
    return Page(items, cursors, found.has_next, after is not None, total)


async def incident(info: Info, ident: str) -> IncidentRecord:
    """`incident(id)` / `node(id)`: NOT_FOUND unless the viewer may operate its namespace."""
    found = await ops.get_incident(runtime(info), viewer(info).actor, local_id(ident, "Incident"))
    if found is None:
        raise DomainError(NOT_FOUND, "incident does not exist or is not visible to you")
    return found


Done = tuple[IncidentRecord, ActResult, ProcessRecord]


async def _after(info: Info, incident_id: str, result: ActResult) -> Done:
    """The incident and the instance as they are now (the retried hook ran meanwhile)."""
    rt = runtime(info)
    found = await ops.get_incident(rt, viewer(info).actor, incident_id)
    record = await get_process(rt, result.record.id)
    assert found is not None and record is not None
    return found, result, record


async def retry(info: Info, ident: str) -> Done:
    """`retryIncident(id)`."""
    incident_id = local_id(ident, "Incident")
    result = await ops.retry_incident(runtime(info), viewer(info).actor, incident_id)
    return await _after(info, incident_id, result)


async def resolve(info: Info, ident: str, action: str, input: Any) -> Done:
    """`resolveIncident(id, action, input)`."""
    if input is not None and not isinstance(input, dict):
        raise DomainError(INVALID_INPUT, "input must be a JSON object", pointer="/input")
    incident_id = local_id(ident, "Incident")
    result = await ops.resolve_incident(
        runtime(info), viewer(info).actor, incident_id, action, input
    )
    return await _after(info, incident_id, result)
