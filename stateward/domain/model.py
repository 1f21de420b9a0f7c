"""Value types shared by the domain modules and every layer above them.

A `Definition` is the typed, immutable form of a validated DSL v2 workflow (built by
`definition.py`); `Actor`, `ProcessSnapshot` and `Outcome` are what the engine takes and
returns. Everything here is a frozen dataclass: plain data, no behaviour beyond lookups.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stateward.domain.frozen import quick_init
from stateward.domain.tasks import TaskSpec

JSON = Any
#: A compiled `when`/`then` expression: (data, input, actor) -> bool.
Predicate = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], bool]

AUDIENCES = ("team", "public", "system")
MODES = ("form", "review", "delegated", "automated")
#: How the next state is chosen (seed §4, §8): declarative rules, a routing hook, or a
#: hook run on entry followed by the rules.
SIMPLE = "simple"
DYNAMIC = "dynamic"
AUTOMATED = "automated"
STAGE_TYPES = (SIMPLE, DYNAMIC, AUTOMATED)
#: `stage_config.auto_assign` values.
ROUND_ROBIN = "round_robin"
AUTO_ASSIGN = (ROUND_ROBIN,)
SYSTEM_ACTOR = "system"
VISITOR_PREFIX = "visitor:"
#: `delegate:<task id>:<16 hex of the token's sha256>`: the worker of a delegated stage,
#: acting with the task's callback token (server-attested only; the write path checks the
#: task is open for that stage and the token is its current one).
DELEGATE_PREFIX = "delegate:"

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


#: `to` of an action that ends the instance as `cancelled` (DSL 2.1).
CANCEL_TARGET = "$cancel"


@dataclass(frozen=True)
class TimeoutSpec:
    """A timer that belongs to a state (`timeout`) or to the instance (`idle_timeout`):
    fire `action` after `seconds`, after the number a `{"$ref"}` resolves to, or after the
    number a value expression (`expression`, its text) gives on the data."""

    action: str
    seconds: float | None = None
    ref: Any = None
    expression: str | None = None


@dataclass(frozen=True)
class AwaitSpec:
    """A join (DSL 2.1 `await`): perform `then` as `system` once `children` ("all",
    "any" or a count) of the children spawned while in the state have finished."""

    children: str | int
    then: str


@dataclass(frozen=True)
class Route:
    """One target of an action whose `to` is a list: the first route whose `when` holds
    (against the data after `mutate`, the input and the actor) wins; no `when` = always."""

    to: str
    when: str | None = None
    when_fn: Predicate | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class RetrySpec:
    """A state's `retries: {max, backoffSeconds}` (issue 15): a failing hook is run again
    up to `max` more times, `backoff_seconds` apart, before the instance stops in `error`."""

    max: int
    backoff_seconds: float = 0.0


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
    #: DSL 2.1: `assign: {"user": <id or {"$ref"}>}` opens the assignment for one person.
    assign_user: Any = None
    #: Issue 16: the task fields of a team `assign` object (candidates, priority, dates).
    task: TaskSpec | None = None
    #: DSL 2.1: warning at this fraction of `sla_seconds` (None: 0.8), and whether the
    #: warning is also written as a notification (like a breach).
    sla_warning: float | None = None
    sla_warning_notify: bool = True
    timeout: TimeoutSpec | None = None
    await_: AwaitSpec | None = None
    #: DSL 2.1, terminal states of a child: data keys handed to the parent's `$child`.
    returns: tuple[str, ...] = ()
    #: Stage type (`type`): simple | dynamic | automated (default: automated for a
    #: `system` state with a hook, else simple).
    stage_type: str = SIMPLE
    #: `auto_transition: true`: on entry, leave at once by branch rules / ordinal + 1.
    auto_transition: bool = False
    #: `stage_config.on_advance`: a hook run by `advance` before routing (result merged).
    on_advance: str | None = None
    #: `stage_config.auto_assign`: "round_robin" gives each new assignment to the next
    #: member of the team.
    auto_assign: str | None = None
    #: Issue 15: automatic re-runs of a failing hook before an incident opens.
    retries: RetrySpec | None = None

    @property
    def assigned(self) -> bool:
        """True when entering the state opens an assignment (for a team or a person)."""
        return self.assign is not None or self.assign_user is not None


@dataclass(frozen=True)
class SpawnSpec:
    """A child to start: target workflow path, child state, data mapping, parent key."""

    workflow: str
    to: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    as_key: str | None = None
    from_states: tuple[str, ...] | None = None
    #: DSL 2.1 multi-instance: a reference to a list; one child per element.
    each: Any = None


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
    #: DSL 2.1: `to` as a list of `{when, to}` (then `to` is None).
    routes: tuple[Route, ...] = ()
    #: Issue 15: the message whose publication performs this action (`message`).
    message: str | None = None
    #: Generated ordinal + 1 fallback of the last state: advancing past the last state
    #: completes the instance (it stays in that state, status `completed`).
    completes: bool = False
    #: Generated hand-over to a hook (`on_advance` or a dynamic state's routing hook):
    #: the submission is validated and merged, the instance stays and the runtime runs
    #: the hook; its recorded `$automate` routes on.
    hook_phase: str | None = None

    @property
    def moves(self) -> bool:
        """True when the action leaves its state (a `to`, routes, `$cancel`, or past the
        last state) or hands the routing to a hook."""
        return (
            self.to is not None
            or bool(self.routes)
            or self.completes
            or self.hook_phase is not None
        )

    @property
    def targets(self) -> tuple[str, ...]:
        """Every state the action may go to (`$cancel` included when it is one)."""
        if self.routes:
            return tuple(dict.fromkeys(r.to for r in self.routes))
        return (self.to,) if self.to is not None else ()


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
    #: DSL 2.1 `start`: roles that may start it (empty = anyone) and spawn-only.
    start_roles: tuple[str, ...] = ()
    spawn_only: bool = False
    idle_timeout: TimeoutSpec | None = None
    #: Issue 15: message name -> data path segments its key is read from (`correlation`).
    correlation: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Issue 15: the message that starts an instance (`start: {"message": ...}`).
    start_message: str | None = None

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

    @property
    def is_delegate(self) -> bool:
        """True for the worker of a delegated stage (`delegate:<task id>`)."""
        return self.id.startswith(DELEGATE_PREFIX)

    def as_value(self) -> dict[str, Any]:
        """The actor as expressions see it: `{id, roles}`."""
        return {"id": self.id, "roles": sorted(self.roles)}


@quick_init
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
    #: A spawned child's parent data as it was at the spawn (what `parent.*` reads).
    parent_data: Mapping[str, Any] | None = None


@quick_init
@dataclass(frozen=True)
class SpawnEffect:
    """A child to create. `state` None means the child workflow's initial state."""

    child_id: str
    workflow: str
    state: str | None
    data: Mapping[str, Any]
    as_key: str | None = None
    #: The parent's data after the event (engine keys left out): the child's `parent.*`.
    parent: Mapping[str, Any] | None = None


@quick_init
@dataclass(frozen=True)
class ScheduleEffect:
    """A timer to register: `due_at` is RFC 3339 UTC (event ts + after, or `at`)."""

    action: str
    due_at: str
    key: str | None = None
    after: float | None = None
    at: str | None = None


@quick_init
@dataclass(frozen=True)
class UnscheduleEffect:
    """A timer to cancel, by key or by action."""

    key: str | None = None
    action: str | None = None


@quick_init
@dataclass(frozen=True)
class SlaEffect:
    """SLA deadlines of the state just entered (None, None clears them)."""

    state: str
    warn_at: str | None
    due_at: str | None


@quick_init
@dataclass(frozen=True)
class DomainEvent:
    """A bus event the outcome causes (type from `events.py`)."""

    type: str
    from_state: str | None = None
    to_state: str | None = None
    team: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


@quick_init
@dataclass(frozen=True)
class Effects:
    """Everything an event causes beyond the process's own data, state and status."""

    spawns: tuple[SpawnEffect, ...] = ()
    schedules: tuple[ScheduleEffect, ...] = ()
    unschedules: tuple[UnscheduleEffect, ...] = ()
    open_assignment: str | None = None  # team of the state entered
    assignee: str | None = None  # the person the state entered is assigned to (DSL 2.1)
    cancel_assignments: bool = False  # the state with open assignments was left
    sla: SlaEffect | None = None
    run_hook: str | None = None  # hook of the system state entered (runtime runs it)
    completed: bool = False


@quick_init
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
