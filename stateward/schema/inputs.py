"""Input objects of the contract: instance and event filters, signed events."""

from __future__ import annotations

import strawberry

from stateward.schema.scalars import JSON


@strawberry.input(description="Which instances to list (omitted = any).")
class InstanceFilter:
    workflow: str | None = None
    namespace: str | None = None
    state: str | None = None
    status: str | None = None
    parent: str | None = None


@strawberry.input(description="Which bus events to receive (omitted = any you may read).")
class EventFilter:
    types: list[str] | None = None
    namespace: str | None = None
    workflow: str | None = None
    instance: str | None = None
    team: str | None = None


@strawberry.input(description="A client-signed envelope, as `submitEvent` takes it.")
class SignedEventInput:
    event: JSON
    signature: str
    signer: str
