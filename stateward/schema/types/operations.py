"""Types of operating instances (issue 15): migration plans and results, incidents."""

from __future__ import annotations

from typing import Any

import strawberry

from stateward.schema.types.instance import Instance
from stateward.schema.types.results import Problem


@strawberry.type(description="A timer a migration cancels or arms.")
class MigrationTimer:
    id: int | None
    action: str
    key: str | None

    @classmethod
    def from_domain(cls, timer: Any) -> MigrationTimer:
        """From `runtime.operate.migration.TimerChange`."""
        return cls(id=timer.id, action=timer.action, key=timer.key)


@strawberry.type(
    description="What migrating one instance does: from/to version and state, assignments "
    "kept, cancelled or opened, timers cancelled or armed, the recomputed SLA deadlines, "
    "and (when refused) every problem (MIGRATION_INVALID with a pointer)."
)
class MigrationPlan:
    instance_id: str
    workflow_path: str
    from_version: int
    to_version: int
    from_state: str
    to_state: str | None
    assignments_kept: list[str]
    assignments_cancelled: list[str]
    assignment_opened: str | None
    timers_cancelled: list[MigrationTimer]
    timers_armed: list[MigrationTimer]
    sla_warn_at: str | None
    sla_due_at: str | None
    problems: list[Problem]
    valid: bool

    @classmethod
    def from_domain(cls, plan: Any) -> MigrationPlan:
        """From `runtime.operate.migration.MigrationPlan`."""
        return cls(
            instance_id=plan.instance,
            workflow_path=plan.workflow,
            from_version=plan.from_version,
            to_version=plan.to_version,
            from_state=plan.from_state,
            to_state=plan.to_state,
            assignments_kept=list(plan.assignments_kept),
            assignments_cancelled=list(plan.assignments_cancelled),
            assignment_opened=plan.assignment_opened,
            timers_cancelled=[MigrationTimer.from_domain(t) for t in plan.timers_cancelled],
            timers_armed=[MigrationTimer.from_domain(t) for t in plan.timers_armed],
            sla_warn_at=plan.sla_warn_at,
            sla_due_at=plan.sla_due_at,
            problems=[Problem.from_domain(p) for p in plan.problems],
            valid=plan.valid,
        )


@strawberry.type(description="`migrateInstance`'s answer: the plan; the instance after the "
                 "`$migrate` event (null on a dry run).")  # fmt: skip
class MigrationResult:
    plan: MigrationPlan
    instance: Instance | None

    @classmethod
    def from_domain(cls, result: Any) -> MigrationResult:
        """From `runtime.operate.migration.MigrationResult`."""
        record = result.result.record if result.result is not None else None
        return cls(
            plan=MigrationPlan.from_domain(result.plan),
            instance=Instance.from_record(record) if record is not None else None,
        )
