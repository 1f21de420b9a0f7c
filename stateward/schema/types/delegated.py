"""Delegated tasks (issue 13): a stage handed to an external surface, as workers see it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry

from stateward.schema.enums import InstanceStatus
from stateward.schema.scalars import JSON


@strawberry.type(
    description="An open delegated stage: an instance in a `delegated` state, waiting for "
    "its surface's worker. Lock it (`lockDelegatedTask`) to get a callback token."
)
class DelegatedTask:
    id: strawberry.ID = strawberry.field(description="The task's id (for `lockDelegatedTask`).")
    instance_id: str = strawberry.field(description="The instance in the delegated state.")
    namespace: str = strawberry.field(description="The instance's namespace.")
    workflow: str = strawberry.field(description="The instance's workflow path.")
    state: str = strawberry.field(description="The delegated state's key.")
    surface: str = strawberry.field(description="The state's `surface`: who renders it.")
    entered_seq: int = strawberry.field(description="The seq of the event that entered it.")
    created_at: datetime = strawberry.field(description="When the instance entered it.")
    locked_by: str | None = strawberry.field(
        description="The worker that last locked the task, or null (the lock may have "
        "lapsed: see `lockedUntil`)."
    )
    locked_until: datetime | None = strawberry.field(
        description="When the current lock lapses (null: never locked)."
    )
    data: JSON = strawberry.field(description="The instance's stage data.")
    form: JSON | None = strawberry.field(description="The state's form template, or null.")
    metadata: JSON = strawberry.field(description="The instance's metadata (`startInstance`).")

    @classmethod
    def from_domain(cls, found: Any) -> DelegatedTask:
        """From `runtime.delegated.tasks.DelegatedTask`."""
        task = found.task
        return cls(
            id=strawberry.ID(task.id), instance_id=task.process_id, namespace=task.namespace,
            workflow=task.workflow, state=task.state, surface=task.surface,
            entered_seq=task.entered_seq, created_at=task.created_at,
            locked_by=task.locked_by, locked_until=task.locked_until,
            data=dict(found.data), form=found.form, metadata=dict(found.metadata),
        )  # fmt: skip


@strawberry.type(
    description="A delegated task locked by the caller, with the callback token that "
    "completes it (`completeDelegatedTask`) until `lockedUntil`. Shown once."
)
class LockedDelegatedTask:
    task: DelegatedTask = strawberry.field(description="The task and its context.")
    token: str = strawberry.field(
        description="The callback token: acts on this task's stage only, until the lock "
        "lapses or the instance leaves the stage."
    )
    locked_until: datetime = strawberry.field(description="When the lock (and token) lapse.")

    @classmethod
    def from_domain(cls, locked: Any) -> LockedDelegatedTask:
        """From `runtime.delegated.tasks.LockedTask`."""
        return cls(
            task=DelegatedTask.from_domain(locked.task),
            token=locked.token,
            locked_until=locked.locked_until,
        )


@strawberry.type(description="What completing (or acting on) a delegated task did.")
class DelegatedCompletion:
    instance_id: str = strawberry.field(description="The instance acted on.")
    action: str = strawberry.field(description="The action performed.")
    state: str = strawberry.field(description="The instance's state after the event.")
    status: InstanceStatus = strawberry.field(description="The instance's status after the event.")
    seq: int = strawberry.field(description="The seq of the event written.")
    duplicate: bool = strawberry.field(description="True when the event was already logged.")

    @classmethod
    def from_domain(cls, result: Any) -> DelegatedCompletion:
        """From `runtime.core.act.ActResult`."""
        return cls(
            instance_id=result.record.id, action=result.event.action,
            state=result.record.state, status=InstanceStatus(result.record.status),
            seq=result.event.seq,
            duplicate=result.duplicate,
        )  # fmt: skip
