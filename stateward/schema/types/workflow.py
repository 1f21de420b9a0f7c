"""Workflow, State, Action and the drawable graph, mapped straight from `domain.model`.

A `Workflow` is one immutable version of a definition. `State`/`Action` keep a reference
to their definition so `incoming`/`outgoing` need no database. `graph` gives a frontend
what it needs to draw the state machine: nodes = states, edges = actions from -> to
(from-anywhere actions fan out to every non-terminal state; generated branch-rule actions
are flagged; self-effects are loops with `selfEffect: true`).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import strawberry
from strawberry.types import Info

from stateward.domain import access
from stateward.domain.effects import SLA_WARNING_FRACTION
from stateward.domain.model import ActionDef, AwaitSpec, Definition, StateDef, TimeoutSpec
from stateward.domain.search import InstanceSearch, Ordering
from stateward.resolvers import reads, search
from stateward.resolvers.ids import to_global_id
from stateward.resolvers.paging import Window
from stateward.schema.enums import (
    Audience,
    FormFieldType,
    InstanceStatus,
    StageMode,
    StageType,
)
from stateward.schema.scalars import JSON
from stateward.schema.types.analytics import WorkflowAnalytics
from stateward.schema.types.connection import Connection
from stateward.schema.types.node import Node

if TYPE_CHECKING:
    from stateward.schema.types.instance import Instance

InstanceRef = Annotated["Instance", strawberry.lazy("stateward.schema.types.instance")]


def version_key(path: str | None, version: int) -> str:
    """The local id of one workflow version: `path@version`."""
    return f"{path or 'system/bootstrap'}@{version}"


@strawberry.type
class FormField:
    """One field of a state's form template."""

    name: str
    type: FormFieldType
    required: bool
    label: str | None
    help: str | None
    min: float | None
    max: float | None
    min_length: int | None
    max_length: int | None
    pattern: str | None
    options: JSON | None


@strawberry.type(description="A timer of a state (`timeout`) or of an instance (`idle_timeout`).")
class Timeout:
    """DSL 2.1 `timeout`: perform `action` (as `system`) after a delay. Exactly one of
    `seconds`, `reference` and `expression` says how long."""

    action: str = strawberry.field(description="The action the timer performs when it fires.")
    seconds: float | None = strawberry.field(description="A literal delay in seconds.")
    reference: JSON | None = strawberry.field(
        description='A `{"$ref": …}` to the instance data that gives the delay in seconds.'
    )
    expression: str | None = strawberry.field(
        description="A value expression over the instance data that gives the delay."
    )

    @classmethod
    def from_domain(cls, spec: TimeoutSpec | None) -> Timeout | None:
        """The timer `spec`, or None when there is none."""
        if spec is None:
            return None
        return cls(action=spec.action, seconds=spec.seconds, reference=spec.ref,
                   expression=spec.expression)  # fmt: skip


@strawberry.type(description="A join (DSL 2.1 `await`) on the children spawned in a state.")
class Join:
    """Perform `then` as `system` once enough children have finished: all of them, any
    one, or `count` of them."""

    children: str = strawberry.field(
        description="`all`, `any`, or the number of children as a decimal string."
    )
    count: int | None = strawberry.field(description="The number of children, when one is set.")
    then: str = strawberry.field(description="The action performed when the join completes.")

    @classmethod
    def from_domain(cls, spec: AwaitSpec | None) -> Join | None:
        """The join `spec`, or None when the state has none."""
        if spec is None:
            return None
        count = spec.children if isinstance(spec.children, int) else None
        return cls(children=str(spec.children), count=count, then=spec.then)


@strawberry.type(description="A state's `retries`: re-runs of a failing hook before an incident.")
class Retries:
    """Issue 15: a failing hook runs again up to `max` more times, `backoffSeconds` apart."""

    max: int = strawberry.field(description="Re-runs after the first failure (0..10).")
    backoff_seconds: float = strawberry.field(description="Seconds between two runs.")


@strawberry.type
class State(Node):
    """A state of one workflow version (DESIGN §2.1)."""

    _definition: strawberry.Private[Definition]
    _version: strawberry.Private[int]
    _state: strawberry.Private[StateDef]
    key: str
    label: str | None
    ordinal: int
    terminal: bool
    description: str | None
    audience: Audience
    sla_seconds: float | None
    assign: str | None
    hook: str | None
    mode: StageMode | None
    surface: str | None
    visible: list[str]
    initial: bool
    type: StageType = strawberry.field(
        description="The stage type: `SIMPLE` (branch rules, then ordinal + 1), `DYNAMIC` "
        "(branch rules, then the hook routes) or `AUTOMATED` (the hook runs on entry, then "
        "branch rules / ordinal + 1). Defaults as the DSL says (docs/reference/stages.md)."
    )
    auto_transition: bool = strawberry.field(
        description="`auto_transition: true`: on entry the instance leaves at once by branch "
        "rules / ordinal + 1, with no hook and no human."
    )
    sla_warning: float | None = strawberry.field(
        description="The fraction of `slaSeconds` at which the SLA warning fires (0.8 unless "
        "the state says otherwise); null when the state has no SLA."
    )
    sla_warning_notifies: bool = strawberry.field(
        description="Whether the SLA warning is also written as a notification (as a breach is)."
    )
    timeout: Timeout | None = strawberry.field(
        description="DSL 2.1: the state's timer (armed on entry, cancelled on leaving), or null."
    )
    join: Join | None = strawberry.field(
        description="DSL 2.1 `await`: the join on the children spawned in this state, or null."
    )
    returns: list[str] = strawberry.field(
        description="DSL 2.1, a terminal state of a child: the data keys handed to the parent."
    )
    assign_user: JSON | None = strawberry.field(
        description='DSL 2.1 `assign: {user}`: the person (an id or a `{"$ref"}`) the '
        "assignment opens for, or null."
    )
    on_advance: str | None = strawberry.field(
        description="`stage_config.on_advance`: the hook `advance` runs before routing, or null."
    )
    auto_assign: str | None = strawberry.field(
        description="`stage_config.auto_assign` (`round_robin`), or null."
    )
    retries: Retries | None = strawberry.field(
        description="Re-runs of a failing hook before the instance stops in `error`, or null."
    )

    @classmethod
    def from_domain(cls, definition: Definition, version: int, state: StateDef) -> State:
        """The state `state` of `definition` (version `version`)."""
        local = f"{version_key(definition.path, version)}#{state.key}"
        return cls(
            id=strawberry.ID(to_global_id("State", local)),
            _definition=definition, _version=version, _state=state,
            key=state.key, label=state.label, ordinal=state.ordinal, terminal=state.terminal,
            description=state.description, audience=Audience(state.audience),
            sla_seconds=state.sla_seconds, assign=state.assign, hook=state.hook,
            mode=None if state.mode is None else StageMode(state.mode), surface=state.surface,
            visible=list(state.visible), initial=definition.initial == state.key,
            type=StageType(state.stage_type), auto_transition=state.auto_transition,
            sla_warning=None if state.sla_seconds is None else (
                SLA_WARNING_FRACTION if state.sla_warning is None else state.sla_warning),
            sla_warning_notifies=state.sla_warning_notify,
            timeout=Timeout.from_domain(state.timeout), join=Join.from_domain(state.await_),
            returns=list(state.returns), assign_user=state.assign_user,
            on_advance=state.on_advance, auto_assign=state.auto_assign,
            retries=None if state.retries is None else Retries(
                max=state.retries.max, backoff_seconds=state.retries.backoff_seconds),
        )  # fmt: skip

    @strawberry.field(description="The form template as authored (JSON), or null.")
    def form(self) -> JSON | None:
        raw = self._definition.source.get("states", {}).get(self.key, {})
        return raw.get("form") if isinstance(raw, dict) else None

    @strawberry.field(description="The form's fields, typed.")
    def form_fields(self) -> list[FormField]:
        form = self._state.form
        if form is None:
            return []
        return [
            FormField(
                name=f.name,
                type=FormFieldType(f.type),
                required=f.required,
                label=f.label,
                help=f.help,
                min=f.min,
                max=f.max,
                min_length=f.min_length,
                max_length=f.max_length,
                pattern=f.pattern,
                options=list(f.options) if f.options is not None else None,
            )
            for f in form.fields
        ]

    @strawberry.field(description="Branch rules as authored (desugared into actions).")
    def branch_rules(self) -> JSON:
        return [
            {"field": r.field, "op": r.op, "value": r.value, "target": r.target}
            for r in self._state.branch_rules
        ]

    @strawberry.field(description="Actions that lead into this state.")
    def incoming(self) -> list[Action]:
        d, v = self._definition, self._version
        return [Action.from_domain(d, v, a) for a in d.actions.values() if self.key in a.targets]

    @strawberry.field(description="Actions that can be taken from this state.")
    def outgoing(self) -> list[Action]:
        d, v = self._definition, self._version
        return [Action.from_domain(d, v, a) for a in d.actions.values() if leaves(a, self._state)]


def leaves(action: ActionDef, state: StateDef) -> bool:
    """True when `action` may be taken from `state` (absent `from` = any non-terminal)."""
    if action.from_states is None:
        return not state.terminal
    return state.key in action.from_states


@strawberry.type
class Action(Node):
    """An action of one workflow version (generated branch actions included)."""

    _action: strawberry.Private[ActionDef]
    key: str
    label: str | None
    roles: list[str]
    from_: list[str] | None = strawberry.field(name="from")
    to: str | None
    when: str | None
    then: str | None
    mutate: JSON
    generated: bool

    @classmethod
    def from_domain(cls, definition: Definition, version: int, action: ActionDef) -> Action:
        """The action `action` of `definition` (version `version`)."""
        local = f"{version_key(definition.path, version)}#{action.key}"
        return cls(
            id=strawberry.ID(to_global_id("Action", local)), _action=action,
            key=action.key, label=action.label, roles=list(action.roles),
            from_=list(action.from_states) if action.from_states is not None else None,
            to=action.to, when=action.when, then=action.then, mutate=dict(action.mutate),
            generated=action.generated,
        )  # fmt: skip

    @strawberry.field(
        description="DSL 2.1: the targets of an action whose `to` is a list, tried in order "
        "(`[{when, to}]`, `when` null on the default route); empty otherwise. `to` is null then."
    )
    def routes(self) -> JSON:
        return [{"when": r.when, "to": r.to} for r in self._action.routes]

    @strawberry.field(
        description="Children this action starts; `each` (DSL 2.1 multi-instance) is the "
        "reference to the list that starts one child per element, null for a single child."
    )
    def spawn(self) -> JSON:
        return [
            {"workflow": s.workflow, "to": s.to, "data": dict(s.data), "as": s.as_key,
             "from": list(s.from_states) if s.from_states is not None else None,
             "each": s.each}
            for s in self._action.spawn
        ]  # fmt: skip

    @strawberry.field(description="Timers this action registers.")
    def schedule(self) -> JSON:
        return [
            {"action": s.action, "after": s.after, "at": s.at, "key": s.key}
            for s in self._action.schedule
        ]

    @strawberry.field(description="Timers this action drops.")
    def unschedule(self) -> JSON:
        return [{"key": u.key, "action": u.action} for u in self._action.unschedule]


@strawberry.type
class GraphNode:
    """A state as a graph node."""

    id: str
    key: str
    label: str | None
    ordinal: int
    audience: Audience
    terminal: bool
    initial: bool
    assign: str | None
    sla_seconds: float | None
    mode: StageMode | None
    hook: str | None


@strawberry.type
class GraphEdge:
    """One way an action moves an instance: `source` -> `target` (same for self-effects)."""

    id: str
    action: str
    label: str | None
    source: str
    target: str
    roles: list[str]
    guarded: bool
    generated: bool
    self_effect: bool


@strawberry.type
class Graph:
    """The state machine as nodes and edges, ready to draw."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]

    @classmethod
    def from_domain(cls, definition: Definition) -> Graph:
        """Nodes in state order; edges in action order, one per source state."""
        states = definition.states
        nodes = [
            GraphNode(
                id=s.key,
                key=s.key,
                label=s.label,
                ordinal=s.ordinal,
                audience=Audience(s.audience),
                terminal=s.terminal,
                initial=s.key == definition.initial,
                assign=s.assign,
                sla_seconds=s.sla_seconds,
                mode=None if s.mode is None else StageMode(s.mode),
                hook=s.hook,
            )
            for s in states.values()
        ]
        edges = []
        for a in definition.actions.values():
            for s in states.values():
                if not leaves(a, s):
                    continue
                for target in [t for t in a.targets if t in states] or [s.key]:
                    edges.append(
                        GraphEdge(
                            id=f"{a.key}:{s.key}->{target}",
                            action=a.key,
                            label=a.label,
                            source=s.key,
                            target=target,
                            roles=list(a.roles),
                            guarded=a.when is not None or bool(a.routes),
                            generated=a.generated,
                            self_effect=not a.moves,
                        )
                    )
        return cls(nodes=nodes, edges=edges)


@strawberry.type
class Workflow(Node):
    """One immutable version of a deployed workflow definition."""

    _definition: strawberry.Private[Definition]
    path: str
    namespace: str
    name: str
    description: str | None
    version: int
    hash: str
    created_at: datetime | None
    removed: bool

    @classmethod
    def from_domain(
        cls, definition: Definition, version: int, created_at: datetime | None = None,
        removed: bool = False,
    ) -> Workflow:  # fmt: skip
        """The workflow `definition` as deployed at `version`."""
        path = definition.path or "system/bootstrap"
        return cls(
            id=strawberry.ID(to_global_id("Workflow", version_key(path, version))),
            _definition=definition, path=path, namespace=definition.namespace,
            name=definition.name, description=definition.description, version=version,
            hash=definition.hash, created_at=created_at, removed=removed,
        )  # fmt: skip

    @classmethod
    def from_version(cls, found: Any) -> Workflow:
        """A stored version as a resolver returns it: anything with `definition`, `version`
        and `created_at` (`DeployedWorkflow`, `VersionedDefinition`)."""
        workflow = cls.from_domain(found.definition, found.version, found.created_at)
        stored = getattr(found, "hash", None)  # a legacy (scheme 1) version keeps its hash
        if isinstance(stored, str):
            workflow.hash = stored
        return workflow

    def _states(self) -> list[State]:
        d = self._definition
        return [State.from_domain(d, self.version, s) for s in d.states.values()]

    @strawberry.field(
        description="DSL 2.1 `idle_timeout`: the instance's timer, re-armed by every event "
        "while the instance is live, or null."
    )
    def idle_timeout(self) -> Timeout | None:
        return Timeout.from_domain(self._definition.idle_timeout)

    @strawberry.field
    def initial_state(self) -> State:
        d = self._definition
        return State.from_domain(d, self.version, d.states[d.initial])

    @strawberry.field
    def states(self) -> list[State]:
        return self._states()

    @strawberry.field
    def state(self, key: str) -> State | None:
        found = self._definition.states.get(key)
        return None if found is None else State.from_domain(self._definition, self.version, found)

    @strawberry.field
    def actions(self, include_generated: bool = True) -> list[Action]:
        d = self._definition
        return [
            Action.from_domain(d, self.version, a)
            for a in d.actions.values()
            if include_generated or not a.generated
        ]

    @strawberry.field(description="The definition as authored (JSON).")
    def definition(self) -> JSON:
        return dict(self._definition.source)

    @strawberry.field
    def graph(self) -> Graph:
        return Graph.from_domain(self._definition)

    @strawberry.field(
        description="Public-entry eligible: any state is public (entry tokens may be issued "
        "for its instances; seed §3a `entry_mode`)."
    )
    def public_entry(self) -> bool:
        return access.public_entry(self._definition)

    @strawberry.field(
        description="Visitors may start it with `startPublic` (initial state public)."
    )
    def public_start(self) -> bool:
        return access.public_start(self._definition)

    @strawberry.field(description="Every deployed version of this path, oldest first.")
    async def versions(
        self, info: Info, first: int | None = None, after: str | None = None,
        last: int | None = None, before: str | None = None,
    ) -> Connection[Workflow]:  # fmt: skip
        page = await reads.workflow_versions(info, self.path, first, after, last, before)
        return Connection.of(page, Workflow.from_version)

    @strawberry.field(description="Instances of this path (any version), oldest first.")
    async def instances(
        self, info: Info, first: int | None = None, after: str | None = None,
        status: InstanceStatus | None = None, state: str | None = None,
        last: int | None = None, before: str | None = None,
    ) -> Connection[InstanceRef]:  # fmt: skip
        from stateward.schema.types.instance import Instance

        wanted = InstanceSearch(
            workflow=self.path, state=state, statuses=() if status is None else (str(status.value),)
        )
        window = Window.of(first, after, last, before)
        page = await search.instances(info, wanted, Ordering(), window)
        return Connection.of(page, Instance.from_record)

    @strawberry.field(
        description="Throughput per day, cycle time, dwell and SLA compliance per state and "
        'counts per status over `period` ("7d", "24h": back from now; the default "7d") or '
        "`from`/`to` (both included), for all versions unless `thisVersion`."
    )
    async def analytics(
        self,
        info: Info,
        period: str | None = None,
        from_: Annotated[datetime | None, strawberry.argument(name="from")] = None,
        to: datetime | None = None,
        this_version: bool = False,
    ) -> WorkflowAnalytics:
        result = await reads.workflow_analytics(
            info,
            self.path,
            self.version if this_version else None,
            period=period,
            from_=from_,
            to=to,
        )
        return WorkflowAnalytics.of(result)
