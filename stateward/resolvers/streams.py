"""Subscription resolvers: live §9 events from the node's bus, resumable by cursor.

Resume without gap or duplicate: subscribe to the bus FIRST (so nothing published from
now on is missed), then replay the outbox backlog after the client's cursor, then pass
live items through, dropping every id at or below the last one replayed. A subscriber
only ever sees namespaces where it holds a role.

The backlog is read in pages of `REPLAY_PAGE` rows, and each row is let go once it is
sent, so a replay holds at most one page: memory is bounded by page size x subscribers,
whatever the backlog (500 concurrent `after: "0"` replays of 500-row pages pinned ~800 MB).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strawberry.types import Info

from stateward.domain import events as ev
from stateward.domain.errors import FORBIDDEN, INVALID_INPUT, NOT_FOUND, DomainError
from stateward.records import OutboxFilter, ProcessRecord
from stateward.resolvers.context import require_read, runtime, services, viewer
from stateward.resolvers.ids import local_id
from stateward.resolvers.loaders import Loaders
from stateward.runtime.access.auth import Viewer
from stateward.runtime.core import queries

REPLAY_PAGE = 50
QUEUE_SIZE = 1000
QUEUE_TYPES = (
    ev.WORKFLOW_ASSIGNED, ev.WORKFLOW_CLAIMED, ev.WORKFLOW_UNCLAIMED,
    ev.ASSIGNMENT_COMPLETED, ev.ASSIGNMENT_CANCELLED, ev.SLA_WARNING, ev.SLA_BREACHED,
)  # fmt: skip
Payload = Mapping[str, Any]


@dataclass(frozen=True)
class StreamFilter:
    """What a subscriber asked for (empty/None = any) plus what it may see."""

    types: tuple[str, ...] = ()
    namespace: str | None = None
    workflow: str | None = None
    instance: str | None = None
    team: str | None = None

    def outbox(self) -> OutboxFilter:
        """The same filter for the outbox backlog query."""
        return OutboxFilter(self.types, self.namespace, self.workflow, self.instance, self.team)

    def matches(self, payload: Payload) -> bool:
        """True when a live payload passes every given criterion."""
        return (
            (not self.types or payload.get("type") in self.types)
            and (self.namespace is None or payload.get("namespace") == self.namespace)
            and (self.workflow is None or payload.get("workflow") == self.workflow)
            and (self.instance is None or payload.get("instanceId") == self.instance)
            and (self.team is None or payload.get("team") == self.team)
        )


def make_filter(
    types: Sequence[str] | None = None, namespace: str | None = None,
    workflow: str | None = None, instance: str | None = None, team: str | None = None,
) -> StreamFilter:  # fmt: skip
    """A checked `StreamFilter` (unknown event types are INVALID_INPUT)."""
    unknown = [t for t in types or () if not ev.is_known(t)]
    if unknown:
        raise DomainError(INVALID_INPUT, f"unknown event type {unknown[0]!r}",
                          pointer="/filter/types")  # fmt: skip
    pid = local_id(instance, "Instance") if instance else None
    return StreamFilter(tuple(types or ()), namespace, workflow, pid, team)


def _visible(me: Viewer) -> Callable[[Payload], bool]:
    return lambda p: me.is_admin or me.can_read(p.get("namespace"))


async def stream(info: Info, where: StreamFilter, after: int | None) -> AsyncGenerator[Payload]:
    """Payloads matching `where` that the viewer may read: backlog after `after`, then live."""
    me = viewer(info)
    visible = _visible(me)
    bus = services(info).bus
    sub = bus.subscribe(lambda p: where.matches(p) and visible(p), QUEUE_SIZE)
    try:
        last = -1
        if after is not None:
            last = after
            while True:
                rows = deque(
                    await queries.outbox_after(runtime(info), last, where.outbox(), REPLAY_PAGE)
                )
                full = len(rows) == REPLAY_PAGE
                while rows:
                    row = rows.popleft()
                    last = row.id
                    message = row.message()
                    del row
                    if visible(message):
                        yield message
                    del message
                if not full:
                    break
        async for payload in sub:
            if int(payload.get("id", 0)) <= last:
                continue
            yield payload
    finally:
        sub.close()


async def events(info: Info, where: StreamFilter, after: str | None) -> AsyncGenerator[Payload]:
    """`Subscription.events(filter, after)`."""
    cursor = None
    if after is not None:
        if not after.isdigit():
            raise DomainError(INVALID_INPUT, "after must be an event cursor (an integer id)",
                              pointer="/after")  # fmt: skip
        cursor = int(after)
    if where.namespace is not None:
        require_read(info, where.namespace, f"namespace {where.namespace}")
    async for payload in stream(info, where, cursor):
        yield payload


async def instance_updated(info: Info, ident: str) -> AsyncGenerator[ProcessRecord]:
    """`Subscription.instanceUpdated(id)`: the instance as it is after each of its events."""
    pid = local_id(ident, "Instance")
    rt = runtime(info)
    record = await queries.get_process(rt, pid)
    if record is None:
        raise DomainError(NOT_FOUND, f"instance {pid} does not exist or is not visible to you")
    require_read(info, record.namespace, f"instance {pid}")
    async for _payload in stream(info, StreamFilter(instance=pid), None):
        fresh = await queries.get_process(rt, pid)
        if fresh is None:
            continue
        info.context.loaders["graph"] = Loaders(rt)  # nested fields must not read stale rows
        yield fresh


async def assignment_queue(info: Info, team: str) -> AsyncGenerator[Payload]:
    """`Subscription.assignmentQueue(team)`: assignment and SLA events of one team."""
    me = viewer(info)
    if not me.is_admin and team.lower() not in {g.role.lower() for g in me.grants}:
        raise DomainError(FORBIDDEN, f"only members of team {team!r} may watch its queue")
    async for payload in stream(info, StreamFilter(types=QUEUE_TYPES, team=team), None):
        yield payload
