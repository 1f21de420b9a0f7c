"""Kernel operations: how each kind of event is evaluated, as a dispatch table.

`act` looks the envelope's action name up in `KERNEL_OPS` (`$start`, `$cancel`,
`$advance`, ...); any other name is a business action of the process's workflow, and an
event on a registry (`action.workflow = "<namespace>/bootstrap"`) is a governance action.
Adding a kernel operation is one async function `(ctx) -> Outcome` plus one line in the
composition root's table (`stateward.runtime.operations`), which `register`s it here; the
function may queue extra row writes on `ctx.after_event` (they run after the event row
exists, in the same transaction). The core registers its own three operations and never
imports a feature package: the features' operations and the governance operation are
handed in by the composition root when `stateward.runtime` is imported.

`evaluate` is the pure core shared by `act` and by `verify`'s replay: the same snapshot
and the same stored event always give the same outcome.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from stateward.domain import engine
from stateward.domain import events as ev
from stateward.domain.effects import entry_effects
from stateward.domain.errors import CONFLICT, FORBIDDEN, INVALID_INPUT, NOT_FOUND, DomainError
from stateward.domain.model import (
    ACTIVE,
    COMPLETED,
    Actor,
    Definition,
    DomainEvent,
    Effects,
    Outcome,
    ProcessSnapshot,
)
from stateward.domain.plan import plan_for
from stateward.domain.timeouts import arm_timers
from stateward.governance.envelope import Envelope, SignedEnvelope
from stateward.persistence import UnitOfWork
from stateward.records import ProcessRecord, StoredEvent

if TYPE_CHECKING:
    from stateward.runtime.core.services import Runtime

START = engine.START
CANCEL = "$cancel"
ADVANCE = engine.ADVANCE
#: Keys a `$start` input may carry; `state` and `parent` only from the system (spawns).
START_KEYS = frozenset({"data", "state", "parent", "parent_data", "metadata"})

AfterEvent = Callable[[StoredEvent], Awaitable[None]]


@dataclass
class ActContext:
    """Everything a kernel operation sees while one event is being applied."""

    runtime: Runtime
    uow: UnitOfWork
    signed: SignedEnvelope
    identity: str
    now: datetime
    actor: Actor
    definition: Definition
    process: ProcessRecord | None
    kind: str
    namespace: str
    workflow: str
    version: int
    claimed_by: str | None = None
    #: The name recorded in `events.action` (an `$advance` records the action it resolved).
    stored_action: str = ""
    #: Extra row writes, run with the stored event once its row exists.
    after_event: list[AfterEvent] = field(default_factory=list)
    #: Bus payload overrides by event type (e.g. the version a deployment created).
    payload_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Other processes this event wrote too (a parent told of its child's end).
    touched: set[str] = field(default_factory=set)
    #: A spawned child's `$start`: the spawning parent (the row's `parent_id`). Set by the
    #: runtime's spawn only, never from an input, so no signer can link itself to a
    #: process (and be reported to it); a `$start` input's `parent` says the same for
    #: children in the parent's namespace.
    spawned_by: str | None = None
    #: Keep the state's entry time although the state key changes (a `$migrate`: the
    #: instance did not enter a state, its state was renamed by a new version).
    keep_entry: bool = False

    @property
    def envelope(self) -> Envelope:
        """The signed envelope."""
        return self.signed.envelope

    @property
    def input(self) -> Mapping[str, Any]:
        """The action's input."""
        return self.signed.envelope.action.input

    def snapshot(self) -> ProcessSnapshot | None:
        """The engine's view of the process before the event (None before `$start`)."""
        if self.process is None:
            return None
        return self.process.snapshot(claimed_by=self.claimed_by)


KernelOp = Callable[[ActContext], Awaitable[Outcome]]
KERNEL_OPS: dict[str, KernelOp] = {}
#: The operation of every event on a registry (`register_governance`).
GOVERNANCE_OPS: dict[str, KernelOp] = {}
GOVERNANCE = "governance"


def register(name: str, op: KernelOp) -> KernelOp:
    """Register the kernel operation `name` (a reserved `$` name); returns `op`."""
    if not name.startswith("$"):
        raise ValueError(f"kernel operation names start with '$': {name!r}")
    KERNEL_OPS[name] = op
    return op


def register_governance(op: KernelOp) -> KernelOp:
    """Register the operation that evaluates every registry event; returns `op`."""
    GOVERNANCE_OPS[GOVERNANCE] = op
    return op


def replay_name(envelope_action: str, stored_action: str) -> str:
    """The action name to replay: an `$advance` replays the action it resolved to."""
    if envelope_action == ADVANCE and stored_action and not stored_action.startswith("$"):
        return stored_action
    return envelope_action


def evaluate(
    definition: Definition,
    process: ProcessSnapshot | None,
    *,
    name: str,
    input: Mapping[str, Any],
    actor: Actor,
    ts: str,
    event_id: str,
    process_id: str,
    authorize: bool = True,
) -> Outcome:
    """The outcome of one event (pure): `engine.apply`, plus a `$start` into a named
    `state` (a spawned child starting where its parent's spawn item says)."""
    if name == START:
        _check_start_input(input, actor)
    event = engine.EngineEvent(
        action=name, actor=actor, ts=ts, event_id=event_id, input=input, process_id=process_id
    )
    outcome = engine.apply(process, event, definition, authorize=authorize)
    if name == START and isinstance(input.get("state"), str):
        outcome = _start_in(definition, outcome, input["state"], ts)
        outcome = arm_timers(definition, None, outcome, ts, timed=plan_for(definition).timed)
    return outcome


def _check_start_input(input: Mapping[str, Any], actor: Actor) -> None:
    unknown = sorted(set(input) - START_KEYS)
    if unknown:
        raise DomainError(
            INVALID_INPUT, f"$start input has no field {unknown[0]!r}", pointer=f"/{unknown[0]}"
        )
    if ("state" in input or "parent" in input or "parent_data" in input) and not actor.is_system:
        raise DomainError(FORBIDDEN, "only the system may start an instance in a chosen state")


def _start_in(definition: Definition, begun: Outcome, state_key: str, ts: str) -> Outcome:
    """Re-target a `$start` outcome to `state_key` (entry effects of that state)."""
    if state_key == begun.state:
        return begun
    target = definition.states.get(state_key)
    if target is None:
        raise DomainError(
            INVALID_INPUT, f"state {state_key!r} is not in {definition.path}", pointer="/state"
        )
    data = dict(begun.data)
    data["state"] = target.key
    events: list[DomainEvent] = [DomainEvent(type=ev.WORKFLOW_STARTED, to_state=target.key)]
    team, sla, hook = entry_effects(target, ts, events)
    status = COMPLETED if target.terminal else ACTIVE
    if target.terminal:
        events.append(DomainEvent(type=ev.WORKFLOW_COMPLETED, to_state=target.key))
    effects = Effects(open_assignment=team, sla=sla, run_hook=hook, completed=target.terminal)
    return Outcome(START, target.key, target.key, status, data, effects, tuple(events))


def apply_engine(ctx: ActContext, name: str | None = None) -> Outcome:
    """`evaluate` for the context's event (authorized), as most operations need."""
    envelope = ctx.envelope
    return evaluate(
        ctx.definition,
        ctx.snapshot(),
        name=name or envelope.action.name,
        input=envelope.action.input,
        actor=ctx.actor,
        ts=envelope.ts,
        event_id=ctx.identity,
        process_id=envelope.process,
    )


async def op_start(ctx: ActContext) -> Outcome:
    """`$start` `{data}`: a new instance of the latest version of `action.workflow`."""
    if ctx.process is not None:
        raise DomainError(CONFLICT, f"process {ctx.envelope.process} already exists")
    return apply_engine(ctx)


async def op_cancel(ctx: ActContext) -> Outcome:
    """`$cancel` `{reason?}`: by an admin or the actor who started the instance."""
    return apply_engine(ctx)


async def op_advance(ctx: ActContext) -> Outcome:
    """`$advance` `{...input}`: the first applicable action; the log records which."""
    outcome = apply_engine(ctx)
    ctx.stored_action = outcome.action
    return outcome


async def op_business(ctx: ActContext) -> Outcome:
    """A business action of the process's workflow (its own name)."""
    if ctx.process is None:
        raise DomainError(NOT_FOUND, f"process {ctx.envelope.process} does not exist")
    return apply_engine(ctx)


register(START, op_start)
register(CANCEL, op_cancel)
register(ADVANCE, op_advance)


def select_op(envelope: Envelope, *, registry: bool) -> KernelOp:
    """The operation that evaluates `envelope`: a kernel op, governance or business."""
    name = envelope.action.name
    if name.startswith("$"):
        op = KERNEL_OPS.get(name)
        if op is None:
            raise DomainError(
                INVALID_INPUT, f"unknown kernel operation {name!r}", pointer="/action/name"
            )
        return op
    if registry:
        governance = GOVERNANCE_OPS.get(GOVERNANCE)
        if governance is None:
            raise RuntimeError("no governance operation registered (import stateward.runtime)")
        return governance
    return op_business
