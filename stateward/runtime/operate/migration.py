"""Instance migration (issue 15): the `$migrate` kernel operation and `migrate_instance`.

A `$migrate` event `{fromVersion, toVersion, stateMap?, mutate?}` moves an instance to
another version of its workflow, in one event through `act`. The pure half (state map,
mutation, form check, the refusals) is `domain.migration`; this module adds what depends
on rows, decided the same way for a dry run and for the event:

- open assignments are kept when the instance stays in a state of the same key that
  still assigns, else cancelled; a target state that assigns and has no kept assignment
  opens one (team or person);
- SLA deadlines are recomputed from the target state's `sla_seconds` and the ORIGINAL
  entry time (`state_entered_at` is kept; the warning/breach marks are cleared, so a
  deadline already past is reported again once for the new state);
- pending timers whose action is no action of the target version are cancelled and
  recorded (`timersCancelled`); the old state's `timeout` timer is cancelled when the
  state key changes (or the target state has no timeout), and a target state's timeout
  is armed from the original entry time when none is pending;
- a target system state with a hook that differs from the current one starts its hook.

Who: `admin` or `operator` in the instance's namespace (`roles.py`), checked inside the
operation, so a client-signed `$migrate` is held to the same rule. `verify` replays the
event with `domain.migration.migrate` and then continues with the target version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from stateward.domain import events as ev
from stateward.domain.access import may_read
from stateward.domain.effects import assign_user, sla_effect
from stateward.domain.errors import CONFLICT, NOT_FOUND, DomainError, Problem
from stateward.domain.migration import (
    MIGRATE,
    MIGRATION_INVALID,
    migration_problems,
    parse_input,
)
from stateward.domain.model import (
    ACTIVE,
    Actor,
    Definition,
    DomainEvent,
    Effects,
    Outcome,
    ScheduleEffect,
    SlaEffect,
    UnscheduleEffect,
)
from stateward.domain.timeouts import timeout_key, timeout_timer
from stateward.domain.timing import format_ts
from stateward.persistence import UnitOfWork
from stateward.persistence.schedules import PENDING
from stateward.records import INSTANCE, ProcessRecord
from stateward.runtime.core.act import ActResult, act, actor_in
from stateward.runtime.core.commands import attest
from stateward.runtime.core.kernel import ActContext
from stateward.runtime.core.ops_support import require_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.operate.roles import require_operator

__all__ = [
    "MIGRATE",
    "MIGRATION_INVALID",
    "MigrationPlan",
    "MigrationResult",
    "TimerChange",
    "migrate_instance",
    "op_migrate",
]


@dataclass(frozen=True)
class TimerChange:
    """A timer a migration cancels or arms."""

    id: int | None
    action: str
    key: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """`{id, action, key}` (the event details' form)."""
        return {"id": self.id, "action": self.action, "key": self.key}


@dataclass(frozen=True)
class MigrationPlan:
    """What a migration of one instance does (or, with problems, why it is refused)."""

    instance: str
    workflow: str
    from_version: int
    to_version: int
    from_state: str
    to_state: str | None
    assignments_kept: tuple[str, ...] = ()
    assignments_cancelled: tuple[str, ...] = ()
    #: The team (or `user:<id>` for a person) of the assignment the migration opens.
    assignment_opened: str | None = None
    timers_cancelled: tuple[TimerChange, ...] = ()
    timers_armed: tuple[TimerChange, ...] = ()
    sla_warn_at: str | None = None
    sla_due_at: str | None = None
    problems: tuple[Problem, ...] = ()

    @property
    def valid(self) -> bool:
        """True when the migration may be applied."""
        return not self.problems

    def details(self) -> dict[str, Any]:
        """The plan as the `workflow.migrated` event's details (small: ids only)."""
        return {
            "fromVersion": self.from_version,
            "toVersion": self.to_version,
            "assignmentsKept": list(self.assignments_kept),
            "assignmentsCancelled": list(self.assignments_cancelled),
            "assignmentOpened": self.assignment_opened,
            "timersCancelled": [t.as_dict() for t in self.timers_cancelled],
            "timersArmed": [t.as_dict() for t in self.timers_armed],
            "slaWarnAt": self.sla_warn_at,
            "slaDueAt": self.sla_due_at,
        }


@dataclass(frozen=True)
class MigrationResult:
    """`migrateInstance`'s answer: the plan, and the event's result (None on a dry run)."""

    plan: MigrationPlan
    result: ActResult | None = None


def migration_input(
    from_version: int,
    to_version: int,
    state_map: Mapping[str, Any] | None = None,
    mutate: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `$migrate` input (empty `stateMap`/`mutate` left out)."""
    value: dict[str, Any] = {"fromVersion": from_version, "toVersion": to_version}
    if state_map:
        value["stateMap"] = dict(state_map)
    if mutate is not None:
        value["mutate"] = dict(mutate)
    return value


async def _plan(
    runtime: Runtime,
    uow: UnitOfWork,
    actor: Actor,
    process: ProcessRecord,
    source: Definition,
    input: Mapping[str, Any],
    ts: str,
) -> tuple[Outcome | None, MigrationPlan, Definition | None]:
    """The outcome (None when refused), the plan and the target definition."""
    require_operator(actor, "migrateInstance")
    parsed = parse_input(input)
    if parsed.from_version != process.workflow_version:
        raise DomainError(
            CONFLICT,
            f"instance {process.id} runs version {process.workflow_version}, not "
            f"{parsed.from_version}; re-read it",
            pointer="/fromVersion",
        )
    base = MigrationPlan(
        instance=process.id,
        workflow=process.workflow,
        from_version=parsed.from_version,
        to_version=parsed.to_version,
        from_state=process.state,
        to_state=None,
    )
    try:
        target = await runtime.definition(uow, process.workflow, parsed.to_version)
    except DomainError as exc:
        if exc.code != NOT_FOUND:
            raise
        problem = Problem(
            MIGRATION_INVALID,
            f"{process.workflow} has no version {parsed.to_version}",
            "/toVersion",
        )
        return None, replace(base, problems=(problem,)), None
    outcome, problems = migration_problems(source, target, process.snapshot(), input, ts)
    if outcome is None:
        return None, replace(base, problems=tuple(problems)), target
    outcome, plan = await _rows(uow, actor, process, source, target, outcome, base)
    plan = replace(plan, problems=(*problems, *plan.problems))
    return (None if plan.problems else outcome), plan, target


async def _rows(
    uow: UnitOfWork,
    actor: Actor,
    process: ProcessRecord,
    source: Definition,
    target: Definition,
    outcome: Outcome,
    base: MigrationPlan,
) -> tuple[Outcome, MigrationPlan]:
    """Assignments, timers, SLA and hook of the migration (see the module docstring)."""
    to_key = outcome.state
    state = target.states[to_key]
    moved = to_key != process.state
    live = process.status == ACTIVE or process.status == "stale"
    events: list[DomainEvent] = []
    open_rows = await uow.assignments.open_for_process(process.id)
    keep = not moved and state.assigned
    kept = tuple(a.id for a in open_rows) if keep else ()
    cancelled = () if keep else tuple(a.id for a in open_rows)
    if cancelled:
        team = open_rows[0].team or None
        events.append(DomainEvent(ev.ASSIGNMENT_CANCELLED, process.state, process.state, team))
    effects = Effects(cancel_assignments=bool(cancelled))
    opened = None
    if live and not kept and state.assign is not None:
        opened = state.assign
        effects = replace(effects, open_assignment=state.assign)
        events.append(DomainEvent(ev.WORKFLOW_ASSIGNED, process.state, to_key, state.assign))
    was = source.states.get(process.state)
    handed = was is not None and was.mode == "delegated" and was.surface == state.surface
    if live and state.mode == "delegated" and state.surface is not None and (moved or not handed):
        # handed to (another) surface by the move: the write path opens a delegated task
        # (and closes the one of the state left)
        details = {ev.D_SURFACE: state.surface}
        events.append(DomainEvent(ev.WORKFLOW_DELEGATED, process.state, to_key, None, details))
    entered = format_ts(process.state_entered_at)
    sla = sla_effect(state, entered) if live else None
    effects = replace(effects, sla=sla or SlaEffect(to_key, None, None))
    timers = await uow.schedules.for_process(process.id, PENDING)
    dropped: list[TimerChange] = []
    unschedules: list[UnscheduleEffect] = []
    old_timeout = timeout_key(process.state)
    for timer in timers:
        vanished = timer.action not in target.actions
        stale_timeout = timer.key == old_timeout and (moved or state.timeout is None)
        if vanished or stale_timeout:
            dropped.append(TimerChange(timer.id, timer.action, timer.key))
            key = timer.key
            drop = UnscheduleEffect(key=key) if key else UnscheduleEffect(action=timer.action)
            unschedules.append(drop)
    armed: list[TimerChange] = []
    schedules: list[ScheduleEffect] = []
    new_key = timeout_key(to_key)
    dropped_ids = {d.id for d in dropped}
    armed_already = any(t.key == new_key and t.id not in dropped_ids for t in timers)
    spec = state.timeout
    problems: list[Problem] = []
    if live and spec is not None and not armed_already:
        try:  # from the data after the migration's mutate, as entering the state would
            arming = timeout_timer(spec, new_key, outcome, entered)
        except DomainError as exc:
            arming = []
            problems.append(
                Problem(MIGRATION_INVALID, f"state {to_key!r}: {exc.message}", "/toVersion")
            )
        schedules.extend(arming)
        armed.extend(TimerChange(None, t.action, new_key) for t in arming)
    effects = replace(effects, unschedules=tuple(unschedules), schedules=tuple(schedules))
    hook = state.hook if state.audience == "system" and not state.terminal else None
    running = source.states.get(process.state)
    if hook is not None and process.status == ACTIVE and (moved or running is None
                                                          or running.hook != hook):  # fmt: skip
        effects = replace(effects, run_hook=hook)
    plan = replace(
        base,
        to_state=to_key,
        assignments_kept=kept,
        assignments_cancelled=cancelled,
        assignment_opened=opened,
        timers_cancelled=tuple(dropped),
        timers_armed=tuple(armed),
        sla_warn_at=sla.warn_at if sla else None,
        sla_due_at=sla.due_at if sla else None,
        problems=tuple(problems),
    )
    migrated = outcome.events[0]
    migrated = replace(migrated, details={**migrated.details, **plan.details()})
    result = replace(outcome, effects=effects, events=(migrated, *events))
    if live and not kept and state.assign_user is not None:
        result = assign_user(result, state, result.data, {}, actor.as_value())
        plan = replace(plan, assignment_opened=f"user:{result.effects.assignee}")
        migrated = replace(migrated, details={**migrated.details, **plan.details()})
        result = replace(result, events=(migrated, *result.events[1:]))
    return result, plan


async def op_migrate(ctx: ActContext) -> Outcome:
    """`$migrate {fromVersion, toVersion, stateMap?, mutate?}` (admin or operator): move
    the instance to `toVersion` (MIGRATION_INVALID with every problem when refused)."""
    process = require_instance(ctx)
    outcome, plan, target = await _plan(
        ctx.runtime, ctx.uow, ctx.actor, process, ctx.definition, ctx.input, ctx.envelope.ts
    )
    if outcome is None or target is None:
        first = plan.problems[0]
        raise DomainError(
            MIGRATION_INVALID,
            f"{len(plan.problems)} reason(s); first: {first.message}",
            pointer=first.pointer,
            problems=plan.problems,
        )
    ctx.definition = target
    ctx.version = plan.to_version
    ctx.keep_entry = True
    return outcome


async def migrate_instance(
    runtime: Runtime,
    actor: str,
    instance_id: str,
    to_version: int,
    state_map: Mapping[str, Any] | None = None,
    mutate: Mapping[str, Any] | None = None,
    *,
    dry_run: bool = False,
) -> MigrationResult:
    """Migrate one instance to `to_version` of its workflow as `actor` (server-attested
    `$migrate` event), or with `dry_run` only plan it (nothing written; the plan lists
    the problems instead of raising MIGRATION_INVALID).

    Raises NOT_FOUND when the actor may not read the instance, FORBIDDEN without the
    admin/operator role, INACTIVE_PROCESS for an ended instance, MIGRATION_INVALID (a
    real run) with every problem and the first one's pointer.
    """
    async with runtime.uow(readonly=True) as uow:
        process = await uow.processes.get(instance_id)
        if process is None or process.kind != INSTANCE:
            raise DomainError(NOT_FOUND, f"instance {instance_id} does not exist")
        who = await actor_in(uow, actor, process.namespace)
        if not may_read(who, entry_token_hash=process.entry_token_hash,
                        started_by=process.started_by):  # fmt: skip
            raise DomainError(NOT_FOUND, f"instance {instance_id} does not exist")
        input = migration_input(process.workflow_version, to_version, state_map, mutate)
        if dry_run:
            source = await runtime.definition(uow, process.workflow, process.workflow_version)
            ts = format_ts(runtime.clock.now())
            _, plan, _ = await _plan(runtime, uow, who, process, source, input, ts)
            return MigrationResult(plan)
    signed = attest(runtime, actor, instance_id, MIGRATE, process.workflow, input)
    result = await act(runtime, signed, attested=True)
    return MigrationResult(plan_of(result, process), result)


def plan_of(result: ActResult, before: ProcessRecord) -> MigrationPlan:
    """The plan a committed `$migrate` event carried (its `workflow.migrated` details)."""
    details: Mapping[str, Any] = {}
    events = result.outcome.events if result.outcome is not None else ()
    for event in events:
        if event.type == ev.WORKFLOW_MIGRATED:
            details = event.details
    if not details:  # a resubmitted event: what its outbox row said, or its input
        for row in result.outbox:
            if row.type == ev.WORKFLOW_MIGRATED:
                details = row.payload.get("details") or {}
    input = result.event.input
    return MigrationPlan(
        instance=result.record.id,
        workflow=result.record.workflow,
        from_version=int(details.get("fromVersion", input.get("fromVersion", 0))),
        to_version=int(details.get("toVersion", input.get("toVersion", 0))),
        from_state=before.state,
        to_state=result.record.state,
        assignments_kept=tuple(details.get("assignmentsKept") or ()),
        assignments_cancelled=tuple(details.get("assignmentsCancelled") or ()),
        assignment_opened=details.get("assignmentOpened"),
        timers_cancelled=tuple(_timer(t) for t in details.get("timersCancelled") or ()),
        timers_armed=tuple(_timer(t) for t in details.get("timersArmed") or ()),
        sla_warn_at=details.get("slaWarnAt"),
        sla_due_at=details.get("slaDueAt"),
    )


def _timer(value: Mapping[str, Any]) -> TimerChange:
    return TimerChange(value.get("id"), str(value.get("action")), value.get("key"))
