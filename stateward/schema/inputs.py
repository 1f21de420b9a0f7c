"""Input objects of the contract: instance and event filters, orderings, signed events.

Each input turns itself into the plain value the resolvers and the runtime take
(`InstanceFilter.to_search()` -> `domain.search.InstanceSearch`), checked there with
stable codes and pointers.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import strawberry

from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.search import (
    ASSIGNMENT_ORDERS,
    INSTANCE_ORDERS,
    AssignmentSearch,
    AuditSearch,
    DataCondition,
    InstanceSearch,
    Ordering,
)
from stateward.schema.enums import (
    AssignmentOrderField,
    AssignmentStatus,
    DataOp,
    IncidentKind,
    InstanceOrderField,
    InstanceStatus,
    SortDirection,
)
from stateward.schema.scalars import JSON


@strawberry.input(description="One condition on instance data: `data.<path> <op> <value>`.")
class DataFilter:
    path: str = strawberry.field(
        description="Dotted path of keys into the data, e.g. `customer.tier`."
    )
    op: DataOp = strawberry.field(description="How the value at the path is compared.")
    value: JSON | None = strawberry.field(
        default=None, description="What it is compared with (a list for IN)."
    )

    def to_condition(self, pointer: str) -> DataCondition:
        """The checked condition (INVALID_INPUT under `pointer` otherwise)."""
        return DataCondition.of(self.path, str(self.op.value), self.value, pointer)


@strawberry.input(description="Which instances to list or act on (omitted fields = any).")
class InstanceFilter:
    workflow: str | None = strawberry.field(
        default=None, description="Workflow path (any version)."
    )
    namespace: str | None = strawberry.field(default=None, description="Exact namespace.")
    state: str | None = strawberry.field(default=None, description="Current state key.")
    status: list[InstanceStatus] | None = strawberry.field(
        default=None, description="Any of these statuses."
    )
    parent: strawberry.ID | None = strawberry.field(
        default=None, description="The parent instance (UUID or node id)."
    )
    assignee: str | None = strawberry.field(
        default=None, description="Has an open assignment claimed by this actor."
    )
    team: str | None = strawberry.field(
        default=None, description="Has an open assignment for this team."
    )
    created_after: datetime | None = strawberry.field(
        default=None, description="Started strictly after this instant."
    )
    created_before: datetime | None = strawberry.field(
        default=None, description="Started strictly before this instant."
    )
    updated_after: datetime | None = strawberry.field(
        default=None, description="Last changed strictly after this instant."
    )
    updated_before: datetime | None = strawberry.field(
        default=None, description="Last changed strictly before this instant."
    )
    sla_breached: bool | None = strawberry.field(
        default=None, description="Its current state's SLA was breached (true) or not (false)."
    )
    stale: bool | None = strawberry.field(
        default=None, description="Status STALE (true) or any other (false)."
    )
    data: list[DataFilter] | None = strawberry.field(
        default=None, description="Conditions on the data, all of which must hold."
    )

    def to_search(self) -> InstanceSearch:
        """The plain search value (checked: data paths, operators, values)."""
        conditions = tuple(
            d.to_condition(f"/filter/data/{n}") for n, d in enumerate(self.data or ())
        )
        return InstanceSearch(
            workflow=self.workflow, namespace=self.namespace, state=self.state,
            statuses=tuple(str(s.value) for s in self.status or ()),
            parent=None if self.parent is None else str(self.parent),
            assignee=self.assignee, team=self.team, created_after=self.created_after,
            created_before=self.created_before, updated_after=self.updated_after,
            updated_before=self.updated_before, sla_breached=self.sla_breached,
            stale=self.stale, data=conditions,
        )  # fmt: skip


def search_of(filter: InstanceFilter | None) -> InstanceSearch:
    """The search of an optional filter (none = every visible instance)."""
    return InstanceSearch() if filter is None else filter.to_search()


@strawberry.input(description="How instances are sorted.")
class InstanceOrder:
    field: InstanceOrderField = strawberry.field(description="The sort key.")
    direction: SortDirection = strawberry.field(
        default=SortDirection.ASC, description="Ascending (default) or descending."
    )
    path: str | None = strawberry.field(
        default=None, description="Dotted data path, with `field: DATA` only."
    )

    def to_ordering(self) -> Ordering:
        """The checked ordering."""
        return Ordering.of(
            str(self.field.value), str(self.direction.value), self.path, INSTANCE_ORDERS
        )


def ordering_of(order: InstanceOrder | None) -> Ordering:
    """The ordering of an optional `orderBy` (default: oldest first)."""
    return Ordering() if order is None else order.to_ordering()


@strawberry.input(description="Which bus events to receive (omitted = any you may read).")
class EventFilter:
    types: list[str] | None = None
    namespace: str | None = None
    workflow: str | None = None
    instance: strawberry.ID | None = None
    team: str | None = None


@strawberry.input(description="A client-signed envelope, as `submitEvent` takes it.")
class SignedEventInput:
    event: JSON
    signature: str
    signer: str


def _signed_event_from_input(cls: type, value: Mapping[str, Any], context: Any) -> Any:
    """Build a `SignedEventInput` from its coerced GraphQL value in one call: graphql-core
    has already checked the three non-null fields (JSON and two strings, none of which
    Strawberry converts further); its generic per-field conversion cost ≈ as much as the
    envelope's parse for a `submitEvents` item."""
    return cls(event=value["event"], signature=value["signature"], signer=value["signer"])


# Strawberry (≥ 0.339) asks the definition's `from_input`, when set, to build the value.
SignedEventInput.__strawberry_definition__.from_input = _signed_event_from_input  # type: ignore[attr-defined]


@strawberry.input(description="Which assignments (omitted fields = any).")
class AssignmentFilter:
    status: list[AssignmentStatus] | None = strawberry.field(
        default=None, description="Any of these statuses."
    )
    team: str | None = strawberry.field(default=None, description="The queue's team.")
    assignee: str | None = strawberry.field(default=None, description="Who claimed it.")
    namespace: str | None = strawberry.field(
        default=None, description="The instance's exact namespace."
    )
    instance: strawberry.ID | None = strawberry.field(
        default=None, description="The instance (UUID or node id)."
    )
    candidate: str | None = strawberry.field(
        default=None, description="Names this actor among its candidate users."
    )
    due_before: datetime | None = strawberry.field(
        default=None, description="Due strictly before this instant (none without a due date)."
    )
    priority: int | None = strawberry.field(
        default=None, description="Priority at least this (none without a priority)."
    )

    def with_legacy(self, team: str | None, status: AssignmentStatus | None) -> AssignmentFilter:
        """This filter with the deprecated `assignments(team, status)` arguments folded in
        (INVALID_INPUT when both forms are given)."""
        if team is not None:
            if self.team is not None:
                raise DomainError(INVALID_INPUT, "give the team once (filter.team)",
                                  pointer="/team")  # fmt: skip
            self.team = team
        if status is not None:
            if self.status is not None:
                raise DomainError(INVALID_INPUT, "give the status once (filter.status)",
                                  pointer="/status")  # fmt: skip
            self.status = [status]
        return self

    def to_search(self) -> AssignmentSearch:
        """The plain search value."""
        return AssignmentSearch(
            statuses=tuple(str(s.value) for s in self.status or ()), team=self.team,
            assignee=self.assignee, namespace=self.namespace,
            process=None if self.instance is None else str(self.instance),
            candidate=self.candidate, due_before=self.due_before, min_priority=self.priority,
        )  # fmt: skip


@strawberry.input(description="How assignments are sorted.")
class AssignmentOrder:
    field: AssignmentOrderField = strawberry.field(description="The sort key.")
    direction: SortDirection = strawberry.field(
        default=SortDirection.ASC, description="Ascending (default) or descending."
    )

    def to_ordering(self) -> Ordering:
        """The checked ordering."""
        return Ordering.of(str(self.field.value), str(self.direction.value), None,
                           ASSIGNMENT_ORDERS)  # fmt: skip


@strawberry.input(description="Which events of the audit log (omitted fields = any).")
class AuditFilter:
    actor: str | None = strawberry.field(default=None, description="Who acted.")
    namespace: str | None = strawberry.field(
        default=None, description="The process's exact namespace."
    )
    workflow: str | None = strawberry.field(default=None, description="Workflow path.")
    action: str | None = strawberry.field(
        default=None, description="Action key (`$`-prefixed for kernel operations)."
    )
    process: strawberry.ID | None = strawberry.field(
        default=None, description="One process (UUID or node id)."
    )
    from_: datetime | None = strawberry.field(
        default=None, name="from", description="Recorded at or after this instant."
    )
    to: datetime | None = strawberry.field(
        default=None, description="Recorded before this instant."
    )

    def to_search(self) -> AuditSearch:
        """The plain search value."""
        return AuditSearch(
            actor=self.actor, namespace=self.namespace, workflow=self.workflow,
            action=self.action, process=None if self.process is None else str(self.process),
            since=self.from_, until=self.to,
        )  # fmt: skip


@strawberry.input(description="How the audit log is sorted: by recording time, then commit order.")
class AuditOrder:
    direction: SortDirection = strawberry.field(
        default=SortDirection.DESC, description="Newest first (default) or oldest first."
    )


@strawberry.input(description="Which incidents to list (omitted fields = any).")
class IncidentFilter:
    namespace: str | None = strawberry.field(
        default=None, description="Exact namespace (only namespaces you operate count)."
    )
    workflow: str | None = strawberry.field(default=None, description="Workflow path.")
    kind: list[IncidentKind] | None = strawberry.field(
        default=None, description="Any of these kinds."
    )
    resolved: bool | None = strawberry.field(
        default=None, description="true: resolved only; false: open only; null: both."
    )
    instance: strawberry.ID | None = strawberry.field(
        default=None, description="One instance's incidents (UUID or node id)."
    )
