"""Nested fields of `Instance`/`Assignment`, all through the request's DataLoaders.

Each function reads one loader (batched across every instance of the response) and maps
the rows; none of them opens a session of its own.
"""

from __future__ import annotations

from strawberry.types import Info

from stateward.domain.available import available_actions
from stateward.domain.errors import NOT_FOUND, DomainError
from stateward.domain.model import Actor
from stateward.records import INSTANCE, ProcessRecord
from stateward.resolvers.context import viewer_or_none
from stateward.resolvers.loaders import VersionedDefinition, loaders
from stateward.schema.types.connection import Connection
from stateward.schema.types.instance import Assignment, Event, Instance
from stateward.schema.types.workflow import Action, State, Workflow

MAX_LAST_EVENTS = 20


def _visible(info: Info, record: ProcessRecord | None) -> bool:
    viewer = viewer_or_none(info)
    return record is not None and viewer is not None and viewer.can_read(record.namespace)


async def instance_by_id(info: Info, process_id: str) -> Instance | None:
    """The instance `process_id` if the viewer may read it, else None."""
    record = await loaders(info).process.load(process_id)
    if record is None or record.kind != INSTANCE or not _visible(info, record):
        return None
    return Instance.from_record(record)


async def definition_of(info: Info, record: ProcessRecord) -> VersionedDefinition:
    """The workflow version `record` is pinned to (batched)."""
    found = await loaders(info).version.load((record.workflow, record.workflow_version))
    if found is None:
        raise DomainError(NOT_FOUND, f"workflow {record.workflow}@{record.workflow_version} "
                          "is not stored")  # fmt: skip
    return found


async def workflow_of(info: Info, record: ProcessRecord) -> Workflow:
    """`Instance.workflow`."""
    found = await definition_of(info, record)
    return Workflow.from_domain(found.definition, found.version, found.created_at)


async def state_of(info: Info, record: ProcessRecord) -> State:
    """`Instance.state`: the current state of the pinned definition."""
    found = await definition_of(info, record)
    state = found.definition.states.get(record.state)
    if state is None:
        raise DomainError(NOT_FOUND, f"state {record.state!r} is not in {record.workflow}")
    return State.from_domain(found.definition, found.version, state)


async def children_of(
    info: Info, process_id: str, first: int | None, after: str | None
) -> Connection[Instance]:
    """`Instance.children`: spawned instances the viewer may read, oldest first."""
    kids = [k for k in await loaders(info).children.load(process_id) if _visible(info, k)]
    return Connection.from_list(
        kids, first, after, key=lambda p: (p.created_at.isoformat(), p.id),
        wrap=Instance.from_record,
    )  # fmt: skip


async def last_events_of(info: Info, process_id: str, count: int) -> list[Event]:
    """`Instance.lastEvents`: the last `count` events (capped), in seq order."""
    n = max(0, min(count, MAX_LAST_EVENTS))
    if n == 0:
        return []
    rows = await loaders(info).last_events.load((process_id, n))
    return [Event.from_record(e) for e in rows]


async def assignments_of(
    info: Info, process_id: str, first: int | None, after: str | None, status: str | None
) -> Connection[Assignment]:
    """`Instance.assignments`, optionally of one status, oldest first."""
    rows = await loaders(info).assignments.load(process_id)
    if status is not None:
        rows = [a for a in rows if a.status == status]
    return Connection.from_list(
        rows, first, after, key=lambda a: (a.created_at.isoformat(), a.id),
        wrap=Assignment.from_record,
    )  # fmt: skip


async def available_actions_of(info: Info, record: ProcessRecord) -> list[Action]:
    """`Instance.availableActions`: what the viewer could do now (pure domain check)."""
    viewer = viewer_or_none(info)
    if viewer is None:
        return []
    found = await definition_of(info, record)
    rows = await loaders(info).assignments.load(record.id)
    claimed_by = next((a.assignee for a in rows if a.status == "claimed"), None)
    actor = Actor(viewer.actor, viewer.roles_in(record.namespace))
    allowed = available_actions(found.definition, record.snapshot(claimed_by), actor)
    return [Action.from_domain(found.definition, found.version, a.action) for a in allowed]
