"""`BusEvent`: one §9 bus message (never the instance data) with its cursor."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import strawberry

from stateward.schema.enums import BusEventType, bus_event_type
from stateward.schema.scalars import JSON


@strawberry.type
class BusEvent:
    """A live event. `id` is the cursor: resubscribe with `after: id` to resume."""

    id: str
    cursor: str = strawberry.field(
        description="Where this event is in the stream: pass it back as `events(after:)` to "
        "resume after it (same type, decimal digits; later events have larger numbers)."
    )
    type: str = strawberry.field(
        description="The event type, e.g. `workflow.advanced` (the same as `eventType`)."
    )
    event_type: BusEventType | None = strawberry.field(  # type: ignore[valid-type]
        description="The event type as an enum (null for a type this schema does not list)."
    )
    at: str | None
    namespace: str | None
    workflow: str | None
    version: int | None
    instance_id: str | None
    actor: str | None
    action: str | None
    from_state: str | None
    to_state: str | None
    assignment_id: str | None
    team: str | None
    details: JSON | None
    process: str | None = strawberry.field(
        default=None, description="The process whose log holds the event (instance or registry)."
    )
    seq: int | None = strawberry.field(
        default=None, description="The event's position in that process's log."
    )
    hash: str | None = strawberry.field(
        default=None, description="The event's chain hash: maps the message to its log event."
    )

    #: Every subscriber allowed to receive this event gets the same result for the same
    #: document: a subscription executes it once per (event, document, variables).
    shared_frame: strawberry.Private[bool] = True

    @classmethod
    def shared(cls, payload: Mapping[str, Any]) -> BusEvent:
        """`from_payload`, one object per payload (the fan-out shares payload objects among
        subscribers, so their executions can be shared, `schema.base`)."""
        key = id(payload)
        hit = _RECENT.get(key)
        if hit is not None and hit[0] is payload:
            return hit[1]
        event = cls.from_payload(payload)
        _RECENT[key] = (payload, event)
        while len(_RECENT) > RECENT_SIZE:
            _RECENT.popitem(last=False)
        return event

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> BusEvent:
        """From a §9 payload (bus message or outbox row)."""
        cursor = int(payload["id"])
        return cls(
            id=str(cursor), cursor=str(cursor), type=str(payload.get("type")),
            event_type=bus_event_type(str(payload.get("type"))), at=payload.get("at"),
            namespace=payload.get("namespace"), workflow=payload.get("workflow"),
            version=payload.get("version"), instance_id=payload.get("instanceId"),
            actor=payload.get("actor"), action=payload.get("action"),
            from_state=payload.get("fromState"), to_state=payload.get("toState"),
            assignment_id=payload.get("assignmentId"), team=payload.get("team"),
            details=payload.get("details"), process=payload.get("process"),
            seq=payload.get("seq"), hash=payload.get("hash"),
        )  # fmt: skip


#: The BusEvent of recent payloads (payload kept, so its id is not reused meanwhile).
RECENT_SIZE = 256
_RECENT: OrderedDict[int, tuple[Mapping[str, Any], BusEvent]] = OrderedDict()
