"""Incidents (issue 15): `Incident` and what `retryIncident` / `resolveIncident` answer."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.types import Info

from stateward.records import IncidentRecord
from stateward.resolvers import instances
from stateward.resolvers.ids import to_global_id
from stateward.schema.enums import IncidentKind
from stateward.schema.types.instance import Event, Instance
from stateward.schema.types.node import Node


@strawberry.type(
    description="A failure that stopped an instance (status `error`: a hook, the cycle "
    "guard, a timer whose action failed), or a webhook delivery of an instance that "
    "exhausted its retries; open until an operator retries it successfully or resolves "
    "it (an action instead, or cancel)."
)
class Incident(Node):
    id: strawberry.ID = strawberry.field(description="The Relay global id.")
    incident_id: str = strawberry.field(description="The incident's own id.")
    kind: IncidentKind = strawberry.field(description="What kind of failure it is.")
    instance_id: str = strawberry.field(description="The stopped instance's id.")
    namespace: str = strawberry.field(description="The instance's namespace.")
    workflow_path: str = strawberry.field(description="The instance's workflow path.")
    state: str = strawberry.field(description="The state the instance stopped in.")
    message: str = strawberry.field(description="Why it stopped (the latest failure).")
    attempts: int = strawberry.field(
        description="Failed runs so far: 1, plus one per retry that failed again."
    )
    created_at: datetime = strawberry.field(description="When the failure stopped it.")
    resolved_at: datetime | None = strawberry.field(description="When it was resolved.")
    resolution: str | None = strawberry.field(
        description="How it ended: `retried`, `action:<name>`, `cancelled` or (a webhook "
        "incident) `delivered`; null while open."
    )
    resolved: bool = strawberry.field(description="True once resolved.")
    delivery_id: int | None = strawberry.field(
        default=None,
        description="The webhook delivery of a `WEBHOOK_EXHAUSTED` incident (its id in "
        "`webhookDeliveries`); null for every other kind.",
    )

    @strawberry.field(description="The stopped instance (null if you may not read it).")
    async def instance(self, info: Info) -> Instance | None:
        record = await instances.instance_by_id(info, self.instance_id)
        return None if record is None else Instance.from_record(record)

    @classmethod
    def from_record(cls, record: IncidentRecord) -> Incident:
        """From the incident row."""
        return cls(
            id=strawberry.ID(to_global_id("Incident", record.id)), incident_id=record.id,
            kind=IncidentKind(record.kind), instance_id=record.process_id,
            namespace=record.namespace, workflow_path=record.workflow, state=record.state,
            message=record.message, attempts=record.attempts, created_at=record.created_at,
            resolved_at=record.resolved_at, resolution=record.resolution,
            resolved=record.resolved, delivery_id=record.delivery_id,
        )  # fmt: skip


@strawberry.type(
    description="What `retryIncident` / `resolveIncident` did: the incident after the "
    "event (a successful retry or a resolution resolves it; a retry that failed again "
    "counts one more attempt), the instance after it, and the signed event."
)
class IncidentResult:
    incident: Incident = strawberry.field(description="The incident now.")
    instance: Instance = strawberry.field(description="The instance now.")
    event: Event = strawberry.field(description="The `$retry` or `$resolve` event.")

    @classmethod
    def from_domain(cls, incident: IncidentRecord, result: Any, record: Any) -> IncidentResult:
        """From the incident re-read after the event, the `ActResult` and the instance now."""
        return cls(
            incident=Incident.from_record(incident),
            instance=Instance.from_record(record),
            event=Event.from_record(result.event),
        )
