"""`Query.node(id)`: refetch any `Node` by its Relay global id."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from strawberry.types import Info

from stateward.domain.errors import INVALID_INPUT, NOT_FOUND, DomainError
from stateward.resolvers import reads
from stateward.resolvers.context import require_read, runtime, viewer
from stateward.resolvers.ids import from_global_id
from stateward.resolvers.loaders import loaders
from stateward.runtime.core import queries
from stateward.schema.types.instance import Assignment, Event
from stateward.schema.types.results import Notification
from stateward.schema.types.workflow import Action, State, Workflow


def _split_version(local: str) -> tuple[str, int]:
    path, sep, version = local.rpartition("@")
    if not sep or not version.isdigit():
        raise DomainError(INVALID_INPUT, "malformed workflow node id", pointer="/id")
    return path, int(version)


async def _workflow(info: Info, local: str) -> Workflow:
    path, version = _split_version(local)
    return await reads.workflow(info, path, version)


async def _part(info: Info, local: str) -> tuple[Workflow, str]:
    version_key, sep, key = local.partition("#")
    if not sep:
        raise DomainError(INVALID_INPUT, "malformed node id", pointer="/id")
    return await _workflow(info, version_key), key


async def _state(info: Info, local: str) -> State:
    wf, key = await _part(info, local)
    state = wf._definition.states.get(key)
    if state is None:
        raise DomainError(NOT_FOUND, f"state {key!r} does not exist in {wf.path}")
    return State.from_domain(wf._definition, wf.version, state)


async def _action(info: Info, local: str) -> Action:
    wf, key = await _part(info, local)
    action = wf._definition.actions.get(key)
    if action is None:
        raise DomainError(NOT_FOUND, f"action {key!r} does not exist in {wf.path}")
    return Action.from_domain(wf._definition, wf.version, action)


async def _event(info: Info, local: str) -> Event:
    pid, _, seq = local.rpartition(":")
    if not pid or not seq.isdigit():
        raise DomainError(INVALID_INPUT, "malformed event node id", pointer="/id")
    process = await loaders(info).process.load(pid)
    found = None
    if process is not None:
        require_read(info, process.namespace, f"event {local}")
        found = await queries.event_at(runtime(info), pid, int(seq))
    if found is None:
        raise DomainError(NOT_FOUND, f"event {local} does not exist or is not visible to you")
    return Event.from_record(found)


async def _assignment(info: Info, local: str) -> Assignment:
    found = await queries.get_assignment_record(runtime(info), local)
    process = None if found is None else await loaders(info).process.load(found.process_id)
    if found is None or process is None:
        raise DomainError(NOT_FOUND, f"assignment {local} does not exist or is not visible")
    require_read(info, process.namespace, f"assignment {local}")
    return Assignment.from_record(found)


async def _notification(info: Info, local: str) -> Notification:
    me = viewer(info)
    recipients = [me.actor, *(f"team:{g.role}" for g in me.grants)]
    found = None
    if local.isdigit():
        found = await queries.notification_by_id(runtime(info), recipients, int(local))
    if found is None:
        raise DomainError(NOT_FOUND, f"notification {local} does not exist or is not yours")
    return Notification.from_record(found)


RESOLVERS: dict[str, Callable[[Info, str], Awaitable[Any]]] = {
    "Registry": reads.registry_of,
    "Workflow": _workflow,
    "State": _state,
    "Action": _action,
    "Instance": reads.instance,
    "Event": _event,
    "Assignment": _assignment,
    "Notification": _notification,
}


async def node(info: Info, ident: str) -> Any:
    """The object a global id names; NOT_FOUND when missing or not visible."""
    viewer(info)
    type_name, local = from_global_id(ident)
    resolve = RESOLVERS.get(type_name)
    if resolve is None:
        raise DomainError(INVALID_INPUT, f"{type_name} is not a node type", pointer="/id")
    return await resolve(info, local)
