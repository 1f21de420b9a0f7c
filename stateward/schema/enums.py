"""Enums of the contract: every closed set the API reads or takes, in SCREAMING_CASE.

Each member's Python value is the string stored in the database and used by the domain
(`InstanceStatus.ACTIVE.value == "active"`), so resolvers pass `.value` down unchanged.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import strawberry

from stateward.domain import events as ev


@strawberry.enum(description="Where an instance is in its life.")
class InstanceStatus(Enum):
    ACTIVE = strawberry.enum_value("active", description="Running; actions may move it on.")
    STALE = strawberry.enum_value(
        "stale", description="Running, but idle longer than its workflow's `staleAfter`."
    )
    COMPLETED = strawberry.enum_value("completed", description="Reached a final state.")
    CANCELLED = strawberry.enum_value("cancelled", description="Cancelled before finishing.")
    ERROR = strawberry.enum_value("error", description="Stopped by a failure it cannot pass.")


@strawberry.enum(description="Comparison of a data filter (`DataFilter.op`).")
class DataOp(Enum):
    EQ = strawberry.enum_value("EQ", description="Equal to a scalar `value`.")
    NE = strawberry.enum_value(
        "NE", description="Not equal to a scalar `value` (a missing path matches too)."
    )
    GT = strawberry.enum_value("GT", description="Greater than a number or string (same type).")
    GTE = strawberry.enum_value("GTE", description="Greater than or equal (same type).")
    LT = strawberry.enum_value("LT", description="Less than a number or string (same type).")
    LTE = strawberry.enum_value("LTE", description="Less than or equal (same type).")
    IN = strawberry.enum_value("IN", description="Equal to one of a list of scalars.")
    CONTAINS = strawberry.enum_value(
        "CONTAINS",
        description="The array at the path holds `value` (a scalar) or every element of it "
        "(a list); the object at the path holds every key/value of it (an object).",
    )
    EXISTS = strawberry.enum_value(
        "EXISTS", description="The path is present (`value` true or omitted) or absent (false)."
    )


@strawberry.enum(description="Sort direction.")
class SortDirection(Enum):
    ASC = strawberry.enum_value("ASC", description="Smallest / oldest first.")
    DESC = strawberry.enum_value("DESC", description="Largest / newest first.")


@strawberry.enum(description="What instances are sorted by (ties broken by id).")
class InstanceOrderField(Enum):
    CREATED = strawberry.enum_value("CREATED", description="Start time.")
    UPDATED = strawberry.enum_value("UPDATED", description="Time of the last change.")
    STATE_ENTERED = strawberry.enum_value(
        "STATE_ENTERED", description="When the instance entered its current state."
    )
    SLA_DUE = strawberry.enum_value(
        "SLA_DUE", description="The current state's SLA deadline (instances without one last)."
    )
    DATA = strawberry.enum_value(
        "DATA", description="The value at `orderBy.path` in the data (missing values last)."
    )


@strawberry.enum(description="What assignments are sorted by (ties broken by id).")
class AssignmentOrderField(Enum):
    CREATED = strawberry.enum_value("CREATED", description="When it was opened.")
    DUE = strawberry.enum_value("DUE", description="Its due date (assignments without one last).")
    PRIORITY = strawberry.enum_value(
        "PRIORITY", description="Its priority (assignments without one last)."
    )


@strawberry.enum(description="Where a review-queue assignment is.")
class AssignmentStatus(Enum):
    UNASSIGNED = strawberry.enum_value("unassigned", description="Open, in its team's queue.")
    CLAIMED = strawberry.enum_value("claimed", description="Open, claimed by one member.")
    COMPLETED = strawberry.enum_value("completed", description="Completed by its assignee.")
    CANCELLED = strawberry.enum_value(
        "cancelled", description="Closed without a review (the instance left the state)."
    )


@strawberry.enum(description="What `instanceCounts` groups by.")
class InstanceGroup(Enum):
    WORKFLOW = strawberry.enum_value("WORKFLOW", description="The workflow path.")
    STATE = strawberry.enum_value("STATE", description="The current state key.")
    STATUS = strawberry.enum_value("STATUS", description="The instance status.")


@strawberry.enum(description="What `assignmentCounts` groups by.")
class AssignmentGroup(Enum):
    TEAM = strawberry.enum_value("TEAM", description="The team (role) of the queue.")
    STATUS = strawberry.enum_value("STATUS", description="The assignment status.")
    ASSIGNEE = strawberry.enum_value("ASSIGNEE", description="Who claimed it (null: nobody).")


@strawberry.enum(description="What kind of failure stopped an instance (issue 15).")
class IncidentKind(Enum):
    HOOK_FAILED = strawberry.enum_value(
        "HOOK_FAILED", description="A hook failed, was not deployed or returned what leads nowhere."
    )
    HOOK_TIMEOUT = strawberry.enum_value(
        "HOOK_TIMEOUT", description="A hook did not answer within the hook timeout."
    )
    CYCLE_GUARD = strawberry.enum_value(
        "CYCLE_GUARD", description="Too many consecutive automated events (a runaway loop)."
    )
    TIMER_FAILED = strawberry.enum_value(
        "TIMER_FAILED", description="A timer's action put the instance in error."
    )
    WEBHOOK_EXHAUSTED = strawberry.enum_value(
        "WEBHOOK_EXHAUSTED", description="A webhook delivery failed on every retry."
    )
    WORKFLOW_ERROR = strawberry.enum_value(
        "WORKFLOW_ERROR", description="Any other failure that put the instance in error."
    )


@strawberry.enum(description="Who acts in a state.")
class Audience(Enum):
    TEAM = strawberry.enum_value("team", description="Signed-in members with the action's role.")
    PUBLIC = strawberry.enum_value(
        "public", description="Visitors with an entry token (no login), and members."
    )
    SYSTEM = strawberry.enum_value(
        "system", description="Only the system: hooks, timers, messages; never a person."
    )


@strawberry.enum(description="How a state is worked (its `mode`).")
class StageMode(Enum):
    FORM = strawberry.enum_value("form", description="Someone fills in the state's form.")
    REVIEW = strawberry.enum_value(
        "review", description="A team member claims the assignment and reviews."
    )
    DELEGATED = strawberry.enum_value(
        "delegated", description="Worked on another surface (named by `surface`)."
    )
    AUTOMATED = strawberry.enum_value("automated", description="A hook does the work.")


@strawberry.enum(description="How a state routes what is submitted in it (its `type`).")
class StageType(Enum):
    SIMPLE = strawberry.enum_value(
        "simple", description="Branch rules, then the next state by ordinal."
    )
    DYNAMIC = strawberry.enum_value(
        "dynamic", description="Branch rules first; otherwise the state's hook routes."
    )
    AUTOMATED = strawberry.enum_value(
        "automated", description="A system state whose hook runs on entry, then routes."
    )


@strawberry.enum(description="Where a webhook delivery is.")
class WebhookDeliveryStatus(Enum):
    PENDING = strawberry.enum_value("pending", description="Not delivered yet; will be tried.")
    DELIVERED = strawberry.enum_value("delivered", description="Accepted by the receiver (2xx).")
    FAILED = strawberry.enum_value("failed", description="Given up after the last attempt.")


@strawberry.enum(description="What a bulk operation does to each instance it matched (issue 15).")
class BatchKind(Enum):
    CANCEL = strawberry.enum_value("cancel", description="Cancels each instance (`bulkCancel`).")
    MIGRATE = strawberry.enum_value(
        "migrate", description="Moves each instance to another version (`bulkMigrate`)."
    )
    RETRY = strawberry.enum_value(
        "retry", description="Re-runs the failed hook of each instance in error (`bulkRetry`)."
    )
    ACTION = strawberry.enum_value(
        "action", description="Performs one action on each instance (`bulkAction`)."
    )


@strawberry.enum(description="Where a bulk operation is.")
class BatchStatus(Enum):
    RUNNING = strawberry.enum_value("running", description="Still applying to its instances.")
    COMPLETED = strawberry.enum_value(
        "completed", description="Tried every instance (see `succeeded`, `failed`, `errors`)."
    )
    CANCELLED = strawberry.enum_value(
        "cancelled", description="Stopped by `cancelBatchOperation`; what was applied stays."
    )


@strawberry.enum(description="What a notification tells (its `payload` has the details).")
class NotificationKind(Enum):
    SLA_WARNING = strawberry.enum_value(
        ev.SLA_WARNING, description="A state's SLA deadline is near (80 % of the budget)."
    )
    SLA_BREACHED = strawberry.enum_value(
        ev.SLA_BREACHED, description="A state's SLA deadline passed."
    )


@strawberry.enum(description="What a visitor sees of an instance's life (`PublicView.status`).")
class PublicViewStatus(Enum):
    ACTIVE = strawberry.enum_value(
        "active", description="In a public step: the visitor may act (see `active`)."
    )
    STALE = strawberry.enum_value(
        "stale", description="In a public step, idle longer than `staleAfter`; acting resumes it."
    )
    PROCESSING = strawberry.enum_value(
        "processing",
        description="Live in a team or system step (or stopped there on an "
        "error): the view is frozen at the last public step.",
    )
    COMPLETED = strawberry.enum_value("completed", description="Finished.")
    CANCELLED = strawberry.enum_value("cancelled", description="Cancelled.")
    ERROR = strawberry.enum_value(
        "error", description="Stopped by a failure while in a public step."
    )


@strawberry.enum(description="The type of a form field (its value's JSON shape and checks).")
class FormFieldType(Enum):
    STRING = strawberry.enum_value("string", description="Text.")
    NUMBER = strawberry.enum_value("number", description="Any JSON number.")
    INTEGER = strawberry.enum_value("integer", description="A whole number.")
    BOOLEAN = strawberry.enum_value("boolean", description="true or false.")
    DATE = strawberry.enum_value("date", description="A calendar date, `YYYY-MM-DD`.")
    DATETIME = strawberry.enum_value(
        "datetime", description="A timestamp in ISO 8601 with an offset."
    )
    EMAIL = strawberry.enum_value("email", description="An e-mail address.")
    ENUM = strawberry.enum_value("enum", description="One of the field's `options`.")


#: What each bus event type means (a type missing here still gets an enum value).
BUS_EVENT_MEANINGS = {
    ev.WORKFLOW_STARTED: "An instance started.",
    ev.WORKFLOW_ADVANCED: "An instance moved to another state.",
    ev.WORKFLOW_UPDATED: "An instance's data changed; its state did not.",
    ev.WORKFLOW_COMPLETED: "An instance reached a final state.",
    ev.WORKFLOW_CANCELLED: "An instance was cancelled.",
    ev.WORKFLOW_ASSIGNED: "An assignment opened.",
    ev.WORKFLOW_CLAIMED: "An assignment was claimed.",
    ev.WORKFLOW_UNCLAIMED: "An assignment was released.",
    ev.ASSIGNMENT_COMPLETED: "An assignment was completed.",
    ev.ASSIGNMENT_CANCELLED: "An assignment was closed without a review.",
    ev.SLA_WARNING: "A state's SLA deadline is near.",
    ev.SLA_BREACHED: "A state's SLA deadline passed.",
    ev.WORKFLOW_ERROR: "An instance stopped on an error.",
    ev.WORKFLOW_STALE: "An instance has been idle longer than its `staleAfter`.",
    ev.WORKFLOW_DEPLOYED: "A workflow version was deployed.",
    ev.WORKFLOW_MIGRATED: "An instance moved to another workflow version.",
    ev.WORKFLOW_RETRIED: "An operator re-ran the failed hook of an instance in error.",
    ev.INCIDENT_CREATED: "A failure stopped an instance: an incident opened.",
    ev.INCIDENT_RESOLVED: "An incident was resolved (retried, an action instead, or cancelled).",
    ev.ROLE_GRANTED: "A role was granted.",
    ev.ROLE_REVOKED: "A role was revoked.",
    ev.LOG_CHECKPOINT: "The deployment log was checkpointed (a signed tree head).",
}


def _bus_member(event_type: str) -> str:
    return event_type.upper().replace(".", "_")


#: The bus event types as an enum (`BusEvent.eventType`): one value per
#: `domain.events.ALL_TYPES`, `workflow.sla.warning` -> `WORKFLOW_SLA_WARNING`.
BusEventType = strawberry.enum(  # type: ignore[call-overload]
    Enum(  # type: ignore[misc]
        "BusEventType",
        {
            _bus_member(t): strawberry.enum_value(
                t, description=BUS_EVENT_MEANINGS.get(t, f"A `{t}` event.")
            )
            for t in ev.ALL_TYPES
        },
    ),
    description="The type of a bus event, as an enum (`BusEvent.type` is the same string).",
)


def bus_event_type(event_type: str) -> Any:
    """The `BusEventType` of a type string, or None for a type the enum does not know."""
    try:
        return BusEventType(event_type)
    except ValueError:
        return None
