"""Instances (running workflows), their events and assignments, and actors.

The scalar fields come straight from the read-model records (`stateward.records`);
everything that needs another row (workflow version, state, parent, assignments, last
events) goes through the request's DataLoaders in `stateward.resolvers.instances`, so
listing 50 instances with their workflow, state, assignments and last events costs a
fixed number of queries.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import strawberry
from strawberry.types import Info

from stateward.domain.canonical import canonical_bytes
from stateward.domain.registry import redact_input
from stateward.records import AssignmentRecord, ProcessRecord, StoredEvent
from stateward.resolvers import instances, reads
from stateward.resolvers.ids import to_global_id
from stateward.schema.enums import AssignmentStatus, InstanceStatus
from stateward.schema.scalars import JSON
from stateward.schema.types.connection import Connection
from stateward.schema.types.node import Node

if TYPE_CHECKING:
    from stateward.schema.types.workflow import Action, State, Workflow

WorkflowRef = Annotated["Workflow", strawberry.lazy("stateward.schema.types.workflow")]
StateRef = Annotated["State", strawberry.lazy("stateward.schema.types.workflow")]
ActionRef = Annotated["Action", strawberry.lazy("stateward.schema.types.workflow")]


@strawberry.type
class Actor:
    """Who acts: an Ed25519 public key (base64url), `system`, or `visitor:<16 hex>`."""

    id: str

    @strawberry.field(description="Roles this actor holds in `namespace`.")
    async def roles(self, info: Info, namespace: str) -> list[str]:
        return await reads.actor_roles(info, self.id, namespace)

    @strawberry.field(description="Namespaces where this actor holds a role (viewer only).")
    def namespaces(self, info: Info) -> list[str]:
        return reads.actor_namespaces(info, self.id)


@strawberry.type
class Event(Node):
    """One signed, hash-chained event of a process's log."""

    process_id: str
    seq: int
    action: str
    workflow: str
    actor: str
    signer: str
    ts: datetime
    nonce: str
    input: JSON
    signature: str
    hash: str
    prev_hash: str | None
    recorded_at: datetime | None
    #: A plain attribute, not a resolver, so graphql completes it as a plain leaf
    #: (`schema/leaves.py`, issue 16).
    envelope: str = strawberry.field(
        description="The signed envelope as stored (canonical JSON); secret inputs such as a "
        "webhook secret are redacted, so such an event's signature no longer checks out here."
    )

    @classmethod
    def from_record(cls, event: StoredEvent) -> Event:
        """The event row `event`, with secret inputs (webhook secrets) redacted."""
        input, envelope = _redacted(event)
        return cls(
            id=strawberry.ID(to_global_id("Event", f"{event.process_id}:{event.seq}")),
            process_id=event.process_id, seq=event.seq, action=event.action,
            workflow=event.workflow, actor=event.actor, signer=event.signer, ts=event.ts,
            nonce=event.nonce, input=input, signature=event.signature, hash=event.hash,
            prev_hash=event.prev_hash, recorded_at=event.recorded_at, envelope=envelope,
        )  # fmt: skip


def _redacted(event: StoredEvent) -> tuple[Any, str]:
    """(input, envelope text) of `event` with the secret inputs of its action masked."""
    input = redact_input(event.action, event.input)
    if input is event.input:
        return event.input, event.envelope
    envelope = json.loads(event.envelope)
    envelope["action"]["input"] = redact_input(event.action, envelope["action"]["input"])
    return input, canonical_bytes(envelope).decode("utf-8")


@strawberry.type
class Assignment(Node):
    """A review-queue item opened when an instance entered a state with `assign`."""

    assignment_id: str
    instance_id: str
    state: str
    team: str
    assignee: str | None
    status: AssignmentStatus
    review_data: JSON | None
    created_at: datetime
    claimed_at: datetime | None
    completed_at: datetime | None
    cancelled_at: datetime | None
    candidate_users: list[str] = strawberry.field(
        default_factory=list,
        description="Users who may claim it without the team's role (and see it in "
        "`myAssignments`).",
    )
    priority: int | None = strawberry.field(
        default=None, description="Its priority (higher = more urgent), or null."
    )
    due_at: datetime | None = strawberry.field(default=None, description="When it is due, or null.")
    follow_up_at: datetime | None = strawberry.field(
        default=None, description="When to look at it again, or null."
    )

    @classmethod
    def from_record(cls, record: AssignmentRecord) -> Assignment:
        """The assignment row `record`."""
        return cls(
            id=strawberry.ID(to_global_id("Assignment", record.id)),
            assignment_id=record.id, instance_id=record.process_id, state=record.state,
            team=record.team, assignee=record.assignee, status=AssignmentStatus(record.status),
            review_data=record.review_data, created_at=record.created_at,
            claimed_at=record.claimed_at, completed_at=record.completed_at,
            cancelled_at=record.cancelled_at, candidate_users=list(record.candidate_users or ()),
            priority=record.priority, due_at=record.due_at, follow_up_at=record.follow_up_at,
        )  # fmt: skip

    @strawberry.field
    async def instance(self, info: Info) -> Instance | None:
        return _instance(await instances.instance_by_id(info, self.instance_id))


async def _readable_parent_id(root: Instance, info: Info) -> str | None:
    """`Instance.parentId`: only a parent the viewer may read is named (issue 10)."""
    parent = root._record.parent_id
    if parent is None or await instances.instance_by_id(info, parent) is None:
        return None
    return parent


@strawberry.type
class Instance(Node):
    """A running (or finished) workflow instance."""

    _record: strawberry.Private[ProcessRecord]
    instance_id: str
    namespace: str
    workflow_path: str
    version: int
    data: JSON
    metadata: JSON = strawberry.field(
        description="The `metadata` given at start ({} when none); not part of routing."
    )
    status: InstanceStatus
    started_by: str | None
    parent_id: str | None = strawberry.field(
        resolver=_readable_parent_id,
        description="The parent's instance id; null when there is none or the viewer may "
        "not read the parent (a child spawned from another namespace).",
    )
    seq: int
    head_hash: str | None
    sla_warn_at: datetime | None
    sla_due_at: datetime | None
    state_entered_at: datetime
    last_event_at: datetime
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_record(cls, record: ProcessRecord) -> Instance:
        """The process row `record`."""
        return cls(
            id=strawberry.ID(to_global_id("Instance", record.id)), _record=record,
            instance_id=record.id, namespace=record.namespace, workflow_path=record.workflow,
            version=record.workflow_version, data=record.data,
            status=InstanceStatus(record.status),
            metadata=dict(record.instance_metadata or {}),
            started_by=record.started_by, seq=record.seq,
            head_hash=record.head_hash, sla_warn_at=record.sla_warn_at,
            sla_due_at=record.sla_due_at, state_entered_at=record.state_entered_at,
            last_event_at=record.last_event_at, created_at=record.created_at,
            updated_at=record.updated_at,
        )  # fmt: skip

    @strawberry.field(description="The workflow version this instance is pinned to.")
    async def workflow(self, info: Info) -> WorkflowRef:
        from stateward.schema.types.workflow import Workflow

        found = await instances.definition_of(info, self._record)
        return Workflow.from_domain(found.definition, found.version, found.created_at)

    @strawberry.field(description="The current state.")
    async def state(self, info: Info) -> StateRef:
        from stateward.schema.types.workflow import State

        found, state = await instances.state_of(info, self._record)
        return State.from_domain(found.definition, found.version, state)

    @strawberry.field(description="True when the current state is terminal.")
    async def terminal(self, info: Info) -> bool:
        return (await instances.state_of(info, self._record))[1].terminal

    @strawberry.field
    async def parent(self, info: Info) -> Instance | None:
        if self._record.parent_id is None:
            return None
        return _instance(await instances.instance_by_id(info, self._record.parent_id))

    @strawberry.field(description="Instances this one spawned, oldest first.")
    async def children(
        self, info: Info, first: int | None = None, after: str | None = None,
        last: int | None = None, before: str | None = None,
    ) -> Connection[Instance]:  # fmt: skip
        page = await instances.children_of(info, self.instance_id, first, after, last, before)
        return Connection.of(page, Instance.from_record)

    @strawberry.field(description="This instance's log, in seq order.")
    async def events(
        self, info: Info, first: int | None = None, after: str | None = None,
        last: int | None = None, before: str | None = None,
    ) -> Connection[Event]:  # fmt: skip
        page = await reads.process_events(info, self.instance_id, first, after, last, before)
        return Connection.of(page, Event.from_record)

    @strawberry.field(description="The last `count` events (at most 20), in seq order.")
    async def last_events(self, info: Info, count: int = 5) -> list[Event]:
        rows = await instances.last_events_of(info, self.instance_id, count)
        return [Event.from_record(e) for e in rows]

    @strawberry.field(description="Assignments of this instance, oldest first.")
    async def assignments(
        self, info: Info, first: int | None = None, after: str | None = None,
        status: AssignmentStatus | None = None, last: int | None = None,
        before: str | None = None,
    ) -> Connection[Assignment]:  # fmt: skip
        wanted = None if status is None else str(status.value)
        page = await instances.assignments_of(
            info, self.instance_id, first, after, wanted, last, before
        )
        return Connection.of(page, Assignment.from_record)

    @strawberry.field(description="Actions the viewer could perform now (role, state, guard).")
    async def available_actions(self, info: Info) -> list[ActionRef]:
        from stateward.schema.types.workflow import Action

        found, allowed = await instances.available_actions_of(info, self._record)
        if found is None:
            return []
        return [Action.from_domain(found.definition, found.version, a) for a in allowed]


def _instance(record: ProcessRecord | None) -> Instance | None:
    return None if record is None else Instance.from_record(record)
