"""`Subscription`: live events over `graphql-transport-ws`, resumable with `after`."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

import strawberry
from strawberry.types import Info

from stateward.resolvers import batches, streams
from stateward.schema.base import LIVE_OPERATION
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


def _direct() -> Callable[[Mapping[str, Any]], Awaitable[bool]] | None:
    """How a live payload this subscriber may receive is sent without Strawberry's
    per-event path: its `BusEvent`'s frame, encoded once for every subscriber with the
    same document and variables (`schema.base.LiveOperation`); None outside a websocket
    operation."""
    live = LIVE_OPERATION.get()
    if live is None:
        return None

    async def send(payload: Mapping[str, Any]) -> bool:
        return await live.send(BusEvent.shared(payload))

    return send
