"""Typed rows of the dashboard aggregates (`instanceCounts`, `assignmentCounts`).

A row names only the grouped fields; the others are null.
"""

from __future__ import annotations

from typing import Any

import strawberry

from stateward.schema.enums import AssignmentStatus, InstanceStatus


@strawberry.type(description="How many instances share the grouped values.")
class InstanceCount:
    workflow: str | None = strawberry.field(description="Workflow path (grouped by WORKFLOW).")
    state: str | None = strawberry.field(description="State key (grouped by STATE).")
    status: InstanceStatus | None = strawberry.field(description="Status (grouped by STATUS).")
    count: int = strawberry.field(description="How many instances.")

    @classmethod
    def from_row(cls, row: tuple[dict[str, Any], int]) -> InstanceCount:
        """One aggregate row."""
        values, n = row
        status = values.get("STATUS")
        return cls(
            workflow=values.get("WORKFLOW"), state=values.get("STATE"),
            status=None if status is None else InstanceStatus(status), count=n,
        )  # fmt: skip


@strawberry.type(description="How many assignments share the grouped values.")
class AssignmentCount:
    team: str | None = strawberry.field(description="Team (grouped by TEAM).")
    status: AssignmentStatus | None = strawberry.field(description="Status (grouped by STATUS).")
    assignee: str | None = strawberry.field(
        description="Assignee (grouped by ASSIGNEE; null also for unclaimed ones)."
    )
    count: int = strawberry.field(description="How many assignments.")

    @classmethod
    def from_row(cls, row: tuple[dict[str, Any], int]) -> AssignmentCount:
        """One aggregate row."""
        values, n = row
        status = values.get("STATUS")
        return cls(
            team=values.get("TEAM"), assignee=values.get("ASSIGNEE"),
            status=None if status is None else AssignmentStatus(status), count=n,
        )  # fmt: skip
