"""Enums of the contract: every closed set the API reads or takes, in SCREAMING_CASE.

Each member's Python value is the string stored in the database and used by the domain
(`InstanceStatus.ACTIVE.value == "active"`), so resolvers pass `.value` down unchanged.
"""

from __future__ import annotations

from enum import Enum

import strawberry


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
