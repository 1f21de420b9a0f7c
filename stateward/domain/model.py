"""Value types shared by the domain modules and every layer above them.

A `Definition` is the typed, immutable form of a validated DSL v2 workflow (built by
`definition.py`); `Actor`, `ProcessSnapshot` and `Outcome` are what the engine takes and
returns. Everything here is a frozen dataclass: plain data, no behaviour beyond lookups.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = Any
#: A compiled `when`/`then` expression: (data, input, actor) -> bool.
Predicate = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], bool]

AUDIENCES = ("team", "public", "system")
MODES = ("form", "review", "delegated", "automated")
SYSTEM_ACTOR = "system"
VISITOR_PREFIX = "visitor:"

# Process statuses
ACTIVE = "active"
STALE = "stale"
COMPLETED = "completed"
CANCELLED = "cancelled"
ERROR = "error"
LIVE_STATUSES = (ACTIVE, STALE)


@dataclass(frozen=True)
class FormField:
    """One field of a state's form template (DESIGN §2.1)."""

    name: str
    type: str
    required: bool = False
    min: float | None = None
    max: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    options: tuple[Any, ...] | None = None
    label: str | None = None
    help: str | None = None


@dataclass(frozen=True)
class FormTemplate:
    """A state's form: ordered fields; `input.fields` is validated against it."""

    fields: tuple[FormField, ...]

    def field(self, name: str) -> FormField | None:
        """The field called `name`, or None."""
        for f in self.fields:
            if f.name == name:
                return f
        return None


@dataclass(frozen=True)
class BranchRule:
    """A branch rule with its target resolved to a state key."""

    field: str
    op: str
    value: Any
    target: str


@dataclass(frozen=True)
class StateDef:
    """A state of a workflow. `ordinal` is its 0-based position in the `states` map."""

    key: str
    ordinal: int
    label: str | None = None
    terminal: bool = False
    description: str | None = None
    audience: str = "team"
    form: FormTemplate | None = None
    assign: str | None = None
    sla_seconds: float | None = None
    hook: str | None = None
    mode: str | None = None
    surface: str | None = None
    visible: tuple[str, ...] = ()
    branch_rules: tuple[BranchRule, ...] = ()


@dataclass(frozen=True)
class SpawnSpec:
    """A child to start: target workflow path, child state, data mapping, parent key."""

    workflow: str
    to: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    as_key: str | None = None
    from_states: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ScheduleSpec:
    """A timer to register: the action to fire, after seconds or at a time, and a key."""

    action: str
    after: float | None = None
    at: Any = None
    key: str | None = None


@dataclass(frozen=True)
class UnscheduleSpec:
    """A timer to drop, by key or by action."""

    key: str | None = None
    action: str | None = None


@dataclass(frozen=True)
class ActionDef:
    """An action. `roles` are lower-cased; empty means any verified actor (`*`/absent).

    `from_states` None means any non-terminal state. `mutate` holds only the data
    operators ($set $merge $append $increment $remove); `$spawn`/`$schedule`/`$unschedule`
    found inside `mutate` are moved into `spawn`/`schedule`/`unschedule`. `when_fn` and
    `then_fn` are the compiled expressions (compiled once per definition).
    """

    key: str
    label: str | None = None
    roles: tuple[str, ...] = ()
    from_states: tuple[str, ...] | None = None
    to: str | None = None
    when: str | None = None
    then: str | None = None
    mutate: Mapping[str, Any] = field(default_factory=dict)
    spawn: tuple[SpawnSpec, ...] = ()
    schedule: tuple[ScheduleSpec, ...] = ()
    unschedule: tuple[UnscheduleSpec, ...] = ()
    generated: bool = False
    when_fn: Predicate | None = field(default=None, compare=False, repr=False)
    then_fn: Predicate | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Definition:
    """A validated DSL v2 workflow, ready to run.

    `states`/`actions` keep map order (ordinals); `actions` includes the guarded actions
    desugared from branch rules (`<state>#<n>`, `generated=True`). `source` is the JSON
    object as authored, `canonical` its RFC 8785 bytes and `hash` their sha256 (hex).
    """

    path: str | None
    description: str | None
    initial: str
    states: Mapping[str, StateDef]
    actions: Mapping[str, ActionDef]
    source: Mapping[str, Any]
    canonical: bytes
    hash: str

    @property
    def namespace(self) -> str:
        """dirname of `$path`."""
        return (self.path or "system/bootstrap").rsplit("/", 1)[0]

    @property
    def name(self) -> str:
        """basename of `$path`."""
        return (self.path or "system/bootstrap").rsplit("/", 1)[1]

    def state(self, key: str) -> StateDef | None:
        """The state called `key`, or None."""
        return self.states.get(key)


@dataclass(frozen=True)
class Actor:
    """Who acts: a public key (base64url), `system`, or `visitor:<16 hex>`.

    `roles` are lower-cased role names the actor holds in the process's namespace.
    """

    id: str
    roles: frozenset[str] = frozenset()
    visitor: bool = False

    @property
    def is_system(self) -> bool:
        """True for the engine's own actor."""
        return self.id == SYSTEM_ACTOR

    @property
    def is_visitor(self) -> bool:
        """True for an anonymous visitor holding an entry token."""
        return self.visitor or self.id.startswith(VISITOR_PREFIX)

    def as_value(self) -> dict[str, Any]:
        """The actor as expressions see it: `{id, roles}`."""
        return {"id": self.id, "roles": sorted(self.roles)}


@dataclass(frozen=True)
class ProcessSnapshot:
    """What the engine needs to know about a process before an event."""

    id: str
    workflow: str
    version: int
    state: str
    status: str
    data: Mapping[str, Any]
    started_by: str | None = None
    claimed_by: str | None = None
    automation_chain: int = 0


@dataclass(frozen=True)
class SpawnEffect:
    """A child to create. `state` None means the child workflow's initial state."""

    child_id: str
    workflow: str
    state: str | None
    data: Mapping[str, Any]
    as_key: str | None = None


@dataclass(frozen=True)
class ScheduleEffect:
    """A timer to register: `due_at` is RFC 3339 UTC (event ts + after, or `at`)."""

    action: str
    due_at: str
    key: str | None = None
    after: float | None = None
    at: str | None = None


@dataclass(frozen=True)
class UnscheduleEffect:
    """A timer to cancel, by key or by action."""

    key: str | None = None
    action: str | None = None


@dataclass(frozen=True)
class SlaEffect:
    """SLA deadlines of the state just entered (None, None clears them)."""

    state: str
    warn_at: str | None
    due_at: str | None


@dataclass(frozen=True)
class DomainEvent:
    """A bus event the outcome causes (type from `events.py`)."""

    type: str
    from_state: str | None = None
    to_state: str | None = None
    team: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Effects:
    """Everything an event causes beyond the process's own data, state and status."""

    spawns: tuple[SpawnEffect, ...] = ()
    schedules: tuple[ScheduleEffect, ...] = ()
    unschedules: tuple[UnscheduleEffect, ...] = ()
    open_assignment: str | None = None  # team of the state entered
    cancel_assignments: bool = False  # the state with open assignments was left
    sla: SlaEffect | None = None
    run_hook: str | None = None  # hook of the system state entered (runtime runs it)
    completed: bool = False


@dataclass(frozen=True)
class Outcome:
    """The result of applying one event: new data, state and status plus effects."""

    action: str
    from_state: str
    state: str
    status: str
    data: Mapping[str, Any]
    effects: Effects = Effects()
    events: tuple[DomainEvent, ...] = ()

    @property
    def state_changed(self) -> bool:
        """True when the event moved the process to another state."""
        return self.state != self.from_state
