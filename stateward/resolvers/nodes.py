"""`Query.node(id)`: refetch any `Node` by its Relay global id.

`node` returns the type name and what that type is built from (a record, a deployed
workflow, a state or action with its workflow); the schema wraps it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from strawberry.types import Info

from stateward.domain.errors import INVALID_INPUT, NOT_FOUND, DomainError
from stateward.domain.model import ActionDef, StateDef
from stateward.records import AssignmentRecord, NotificationRecord, StoredEvent
from stateward.resolvers import batches, incidents, reads
from stateward.resolvers.context import runtime, viewer
from stateward.resolvers.ids import from_global_id
from stateward.resolvers.loaders import loaders
from stateward.runtime.access.registry import DeployedWorkflow
from stateward.runtime.core import policy, queries


def _split_version(local: str) -> tuple[str, int]:
    path, sep, version = local.rpartition("@")
    if not sep or not version.isdigit():
        raise DomainError(INVALID_INPUT, "malformed workflow node id", pointer="/id")
    return path, int(version)


async def _workflow(info: Info, local: str) -> DeployedWorkflow:
    path, version = _split_version(local)
    return await reads.workflow(info, path, version)


async def _part(info: Info, local: str) -> tuple[DeployedWorkflow, str]:
    version_key, sep, key = local.partition("#")
    if not sep:
        raise DomainError(INVALID_INPUT, "malformed node id", pointer="/id")
    return await _workflow(info, version_key), key


async def _state(info: Info, local: str) -> tuple[DeployedWorkflow, StateDef]:
    wf, key = await _part(info, local)
    state = wf.definition.states.get(key)
    if state is None:
        raise DomainError(NOT_FOUND, f"state {key!r} does not exist in {wf.path}")
    return wf, state


async def _action(info: Info, local: str) -> tuple[DeployedWorkflow, ActionDef]:
    wf, key = await _part(info, local)
    action = wf.definition.actions.get(key)
    if action is None:
        raise DomainError(NOT_FOUND, f"action {key!r} does not exist in {wf.path}")
    return wf, action


async def _event(info: Info, local: str) -> StoredEvent:
    pid, _, seq = local.rpartition(":")
    if not pid or not seq.isdigit():
        raise DomainError(INVALID_INPUT, "malformed event node id", pointer="/id")
    process = await loaders(info).process.load(pid)
    policy.readable_process(viewer(info), process, kind=None)
    found = await queries.event_at(runtime(info), pid, int(seq))
    if found is None:
        raise policy.not_found("event")
    return found


async def _assignment(info: Info, local: str) -> AssignmentRecord:
    found = await queries.get_assignment_record(runtime(info), local)
    process = None if found is None else await loaders(info).process.load(found.process_id)
    if found is None or not policy.visible_process(viewer(info), process):
        raise policy.not_found("assignment")
    return found


async def _notification(info: Info, local: str) -> NotificationRecord:
    found = None
    if local.isdigit():
        found = await queries.notification_by_id(runtime(info), int(local))
    if not policy.can_read_notification(viewer(info), found):
        raise policy.not_found("notification")
    assert found is not None
    return found


RESOLVERS: dict[str, Callable[[Info, str], Awaitable[Any]]] = {
    "Registry": reads.registry_of,
    "Workflow": _workflow,
    "State": _state,
    "Action": _action,
    "Instance": reads.instance,
    "Event": _event,
    "Assignment": _assignment,
    "Notification": _notification,
    "BatchOperation": batches.batch_operation,
    "Incident": incidents.incident,
}


async def node(info: Info, ident: str) -> tuple[str, Any]:
    """(type name, what the object is built from) for a global id; NOT_FOUND when missing
    or not visible."""
    viewer(info)
    type_name, local = from_global_id(ident)
    resolve = RESOLVERS.get(type_name)
    if resolve is None:
        raise DomainError(INVALID_INPUT, f"{type_name} is not a node type", pointer="/id")
    return type_name, await resolve(info, local)
