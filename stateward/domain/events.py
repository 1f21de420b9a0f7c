"""Domain event names (DESIGN §9) and the field names of their bus payload.

The engine returns `model.DomainEvent`s typed with these constants; the runtime turns
each into an outbox row whose payload carries the `PAYLOAD_FIELDS` below and never the
instance data (a bus message must stay small).
"""

from __future__ import annotations

from typing import Final

WORKFLOW_STARTED: Final = "workflow.started"
WORKFLOW_ADVANCED: Final = "workflow.advanced"  # the state changed
WORKFLOW_UPDATED: Final = "workflow.updated"  # a self-effect: data changed, state did not
WORKFLOW_COMPLETED: Final = "workflow.completed"
WORKFLOW_CANCELLED: Final = "workflow.cancelled"
WORKFLOW_ASSIGNED: Final = "workflow.assigned"
#: The instance entered a `delegated` state: the stage is handed to its `surface` (details:
#: `surface`, `task`); the context itself goes to the surface's webhook, not on the bus.
WORKFLOW_DELEGATED: Final = "workflow.delegated"
WORKFLOW_CLAIMED: Final = "workflow.claimed"
WORKFLOW_UNCLAIMED: Final = "workflow.unclaimed"
ASSIGNMENT_COMPLETED: Final = "workflow.assignment.completed"
ASSIGNMENT_CANCELLED: Final = "workflow.assignment.cancelled"
SLA_WARNING: Final = "workflow.sla.warning"
SLA_BREACHED: Final = "workflow.sla.breached"
WORKFLOW_ERROR: Final = "workflow.error"
WORKFLOW_STALE: Final = "workflow.stale"
WORKFLOW_DEPLOYED: Final = "workflow.deployed"
#: An instance moved to another version of its workflow (`$migrate`, issue 15).
WORKFLOW_MIGRATED: Final = "workflow.migrated"
#: An operator re-ran the failed hook of an instance in `error` (`$retry`, issue 15).
WORKFLOW_RETRIED: Final = "workflow.retried"
#: An incident was opened / resolved (issue 15; staged by the core write path).
INCIDENT_CREATED: Final = "incident.created"
INCIDENT_RESOLVED: Final = "incident.resolved"
ROLE_GRANTED: Final = "registry.role.granted"
ROLE_REVOKED: Final = "registry.role.revoked"
#: A node signed a checkpoint of the deployment log (details: the signed checkpoint).
LOG_CHECKPOINT: Final = "log.checkpoint"

#: Every event type a subscriber may filter on, in the order of DESIGN §9.
ALL_TYPES: Final = (
    WORKFLOW_STARTED,
    WORKFLOW_ADVANCED,
    WORKFLOW_UPDATED,
    WORKFLOW_COMPLETED,
    WORKFLOW_CANCELLED,
    WORKFLOW_ASSIGNED,
    WORKFLOW_DELEGATED,
    WORKFLOW_CLAIMED,
    WORKFLOW_UNCLAIMED,
    ASSIGNMENT_COMPLETED,
    ASSIGNMENT_CANCELLED,
    SLA_WARNING,
    SLA_BREACHED,
    WORKFLOW_ERROR,
    WORKFLOW_STALE,
    WORKFLOW_DEPLOYED,
    WORKFLOW_MIGRATED,
    WORKFLOW_RETRIED,
    INCIDENT_CREATED,
    INCIDENT_RESOLVED,
    ROLE_GRANTED,
    ROLE_REVOKED,
    LOG_CHECKPOINT,
)

#: The kinds a notification may have (`Notification.kind`; the API's enum maps each).
NOTIFICATION_KINDS: Final = frozenset({SLA_WARNING, SLA_BREACHED})

# Bus payload fields (DESIGN §9). `id` is the outbox cursor; `details` is a small object.
F_ID: Final = "id"
F_TYPE: Final = "type"
F_AT: Final = "at"
F_NAMESPACE: Final = "namespace"
F_WORKFLOW: Final = "workflow"
F_VERSION: Final = "version"
F_INSTANCE_ID: Final = "instanceId"
F_ACTOR: Final = "actor"
F_ACTION: Final = "action"
F_FROM_STATE: Final = "fromState"
F_TO_STATE: Final = "toState"
F_ASSIGNMENT_ID: Final = "assignmentId"
F_TEAM: Final = "team"
F_DETAILS: Final = "details"
# The log event a message came from (beyond §9): two messages of one batch differ here.
F_PROCESS: Final = "process"
F_SEQ: Final = "seq"
F_HASH: Final = "hash"

PAYLOAD_FIELDS: Final = (
    F_ID,
    F_TYPE,
    F_AT,
    F_NAMESPACE,
    F_WORKFLOW,
    F_VERSION,
    F_INSTANCE_ID,
    F_ACTOR,
    F_ACTION,
    F_FROM_STATE,
    F_TO_STATE,
    F_ASSIGNMENT_ID,
    F_TEAM,
    F_DETAILS,
    F_PROCESS,
    F_SEQ,
    F_HASH,
)

# Keys the engine puts in `DomainEvent.details` (small values only, never instance data).
D_REASON: Final = "reason"  # workflow.cancelled / workflow.error
D_CHILDREN: Final = "children"  # workflow.advanced/updated: ids of spawned children
D_HOOK: Final = "hook"  # workflow.error raised by a hook
D_ASSIGNMENT: Final = "assignment"  # claim/unclaim/assignment events: the assignment id
D_PATH: Final = "path"  # workflow.deployed: the deployed `$path`
D_ROLES: Final = "roles"  # registry.role.*: the roles granted or revoked
D_MEMBER: Final = "member"  # registry.role.*: the actor whose roles changed
D_SURFACE: Final = "surface"  # workflow.delegated: the state's `surface`
D_TASK: Final = "task"  # workflow.delegated: the delegated task's id


def is_known(event_type: str) -> bool:
    """True when `event_type` is one of the §9 names (subscription filters validate with it)."""
    return event_type in ALL_TYPES
