"""`auto_transition: true` (seed §3a): a state left on entry, in the same event.

After any outcome that enters such a state (and leaves the instance live), the engine
routes out of it as the `system` actor by its generated branch actions only (its rules in
order, then ordinal + 1, or completion past the last state) and folds the step into the
outcome: one event, the data and effects of the whole chain, every bus event in order.
At most `MAX_AUTOMATION_CHAIN` steps in one event; the next one puts the instance in
status `error` with `workflow.error` (the cycle guard of automated states).
"""

from __future__ import annotations

from dataclasses import replace

from stateward.domain import events as ev
from stateward.domain.errors import NO_APPLICABLE_ACTION, DomainError
from stateward.domain.model import (
    ACTIVE,
    ERROR,
    SYSTEM_ACTOR,
    Actor,
    Definition,
    DomainEvent,
    Effects,
    Outcome,
    ProcessSnapshot,
)
from stateward.domain.plan import plan_for
from stateward.domain.transition import execute_generated

MAX_CHAIN = 10
_SYSTEM = Actor(id=SYSTEM_ACTOR)


def follow(
    definition: Definition,
    process: ProcessSnapshot | None,
    outcome: Outcome,
    ts: str,
    event_id: str,
    process_id: str,
) -> Outcome:
    """`outcome`, continued through every `auto_transition` state it enters."""
    entered = process is None or outcome.state_changed
    steps = 0
    while entered and outcome.status == ACTIVE:
        state = definition.states.get(outcome.state)
        if state is None or not state.auto_transition or state.terminal:
            break
        if steps >= MAX_CHAIN:
            reason = f"more than {MAX_CHAIN} auto transitions in one event (cycle guard)"
            error = DomainEvent(
                ev.WORKFLOW_ERROR, state.key, state.key, None, {ev.D_REASON: reason}
            )
            return replace(outcome, status=ERROR, events=(*outcome.events, error))
        snapshot = ProcessSnapshot(
            id=process.id if process is not None else process_id,
            workflow=definition.path or "",
            version=process.version if process is not None else 0,
            state=state.key,
            status=ACTIVE,
            data=outcome.data,
        )
        step_id = f"{event_id}:auto:{steps}"
        plan = plan_for(definition)
        for act in plan.candidates.get(state.key, ()):
            if not act.generated:
                continue
            if act.when_fn is not None and not act.when_fn(outcome.data, {}, _SYSTEM.as_value()):
                continue
            nxt = execute_generated(plan, snapshot, state, act, ts, step_id)
            break
        else:  # pragma: no cover - validation guarantees a fallback or completion
            raise DomainError(NO_APPLICABLE_ACTION, f"{state.key!r}: no way out")
        outcome = combine(outcome, nxt)
        entered = nxt.state_changed
        steps += 1
    return outcome


def combine(first: Outcome, second: Outcome) -> Outcome:
    """One outcome for two steps of one event: `second` continues from `first`'s state."""
    a, b = first.effects, second.effects
    effects = Effects(
        spawns=(*a.spawns, *b.spawns),
        schedules=(*a.schedules, *b.schedules),
        unschedules=(*a.unschedules, *b.unschedules),
        open_assignment=b.open_assignment,
        assignee=b.assignee,
        cancel_assignments=a.cancel_assignments or b.cancel_assignments,
        sla=b.sla if b.sla is not None else a.sla,
        run_hook=b.run_hook,
        completed=b.completed,
    )
    return Outcome(
        first.action,
        first.from_state,
        second.state,
        second.status,
        second.data,
        effects,
        (*first.events, *second.events),
    )
