"""`Subscription`: live events over `graphql-transport-ws`, resumable with `after`."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import strawberry
from strawberry.types import Info

from stateward.resolvers import batches, streams
from stateward.schema.base import LIVE_OPERATION, LiveOperation
from stateward.schema.inputs import EventFilter
from stateward.schema.types.batches import BatchOperation
from stateward.schema.types.bus import BusEvent
from stateward.schema.types.instance import Instance


@strawberry.type
class Subscription:
    """Live §9 events; a subscriber sees only namespaces where it holds a role."""

    @strawberry.subscription(description="Bus events; `after: <cursor>` replays missed ones.")
    async def events(
        self, info: Info, filter: EventFilter | None = None, after: str | None = None
    ) -> AsyncGenerator[BusEvent]:
        f = filter or EventFilter()
        where = streams.make_filter(f.types, f.namespace, f.workflow, f.instance, f.team)
        async for payload in streams.events(info, where, after, _direct()):
            yield BusEvent.shared(payload)

    @strawberry.subscription(description="The instance after each of its events.")
    async def instance_updated(self, info: Info, id: strawberry.ID) -> AsyncGenerator[Instance]:
        async for record in streams.instance_updated(info, id):
            yield Instance.from_record(record)

    @strawberry.subscription(description="Assignment and SLA events of one team's queue.")
    async def assignment_queue(self, info: Info, team: str) -> AsyncGenerator[BusEvent]:
        async for payload in streams.assignment_queue(info, team, _direct()):
            yield BusEvent.shared(payload)

    @strawberry.subscription(
        description="A bulk operation now and after each change of its progress, until it ends."
    )
    async def batch_operation(
        self, info: Info, id: strawberry.ID
    ) -> AsyncGenerator[BatchOperation]:
        async for batch in batches.watch(info, id):
            yield BatchOperation.from_record(batch)


class _Direct:
    """A live payload this subscriber may receive, sent without Strawberry's per-event
    path: its `BusEvent`'s frame, encoded once for every subscriber with the same document
    and variables (`schema.base.LiveOperation`) — from the subscriber's task (`send`) or
    straight from the fan-out loop (`send_now`)."""

    __slots__ = ("live",)

    def __init__(self, live: LiveOperation) -> None:
        self.live = live

    async def send(self, payload: Mapping[str, Any]) -> bool:
        """Send `payload`'s frame, waiting for the socket if need be; False to decline."""
        return await self.live.send(BusEvent.shared(payload))

    def send_now(self, payload: Mapping[str, Any]) -> bool:
        """Write `payload`'s frame at once; False when it can't be written now."""
        return self.live.send_now(BusEvent.shared(payload))


def _direct() -> _Direct | None:
    """The current websocket operation's direct sender (None outside one)."""
    live = LIVE_OPERATION.get()
    return None if live is None else _Direct(live)
