"""Nested fields of `Instance`/`Assignment`, all through the request's DataLoaders.

Each function reads one loader (batched across every instance of the response) and
returns records, definitions or a `Page` of them (the schema types wrap them); none of
them opens a session of its own.
"""

from __future__ import annotations

from strawberry.types import Info

from stateward.domain.available import available_actions
from stateward.domain.errors import NOT_FOUND, DomainError
from stateward.domain.model import ActionDef, Actor, StateDef
from stateward.records import INSTANCE, AssignmentRecord, ProcessRecord, StoredEvent
from stateward.resolvers.context import viewer_or_none
from stateward.resolvers.loaders import VersionedDefinition, loaders
from stateward.resolvers.paging import Page, page_of_list
from stateward.runtime.core import policy

MAX_LAST_EVENTS = 20


def _visible(info: Info, record: ProcessRecord | None) -> bool:
    return policy.visible_process(viewer_or_none(info), record)


async def instance_by_id(info: Info, process_id: str) -> ProcessRecord | None:
    """The instance `process_id` if the viewer may read it, else None."""
    record = await loaders(info).process.load(process_id)
    if record is None or record.kind != INSTANCE or not _visible(info, record):
        return None
    return record


async def definition_of(info: Info, record: ProcessRecord) -> VersionedDefinition:
    """The workflow version `record` is pinned to (batched)."""
    found = await loaders(info).version.load((record.workflow, record.workflow_version))
    if found is None:
        raise DomainError(NOT_FOUND, f"workflow {record.workflow}@{record.workflow_version} "
                          "is not stored")  # fmt: skip
    return found


async def state_of(info: Info, record: ProcessRecord) -> tuple[VersionedDefinition, StateDef]:
    """`Instance.state`: the current state of the pinned definition."""
    found = await definition_of(info, record)
    state = found.definition.states.get(record.state)
    if state is None:
        raise DomainError(NOT_FOUND, f"state {record.state!r} is not in {record.workflow}")
    return found, state


async def children_of(
    info: Info, process_id: str, first: int | None, after: str | None,
    last: int | None = None, before: str | None = None,
) -> Page[ProcessRecord]:  # fmt: skip
    """`Instance.children`: spawned instances the viewer may read, oldest first."""
    kids = [k for k in await loaders(info).children.load(process_id) if _visible(info, k)]
    return page_of_list(kids, first, after, _created_key, last, before)


def _created_key(row: ProcessRecord | AssignmentRecord) -> tuple[str, str]:
    return (row.created_at.isoformat(), row.id)


async def last_events_of(info: Info, process_id: str, count: int) -> list[StoredEvent]:
    """`Instance.lastEvents`: the last `count` events (capped), in seq order."""
    n = max(0, min(count, MAX_LAST_EVENTS))
    if n == 0:
        return []
    return list(await loaders(info).last_events.load((process_id, n)))


async def assignments_of(
    info: Info, process_id: str, first: int | None, after: str | None, status: str | None,
    last: int | None = None, before: str | None = None,
) -> Page[AssignmentRecord]:  # fmt: skip
    """`Instance.assignments`, optionally of one status, oldest first."""
    rows = await loaders(info).assignments.load(process_id)
    if status is not None:
        rows = [a for a in rows if a.status == status]
    return page_of_list(rows, first, after, _created_key, last, before)


async def available_actions_of(
    info: Info, record: ProcessRecord
) -> tuple[VersionedDefinition | None, list[ActionDef]]:
    """`Instance.availableActions`: what the viewer could do now (pure domain check)."""
    viewer = viewer_or_none(info)
    if viewer is None:
        return None, []
    found = await definition_of(info, record)
    rows = await loaders(info).assignments.load(record.id)
    claimed_by = next((a.assignee for a in rows if a.status == "claimed"), None)
    actor = Actor(viewer.actor, viewer.roles_in(record.namespace))
    allowed = available_actions(found.definition, record.snapshot(claimed_by), actor)
    return found, [a.action for a in allowed]
