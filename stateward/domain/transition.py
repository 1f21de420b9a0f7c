"""Business paths of the engine (DESIGN §5): `start`, `perform` and `advance`.

Import them from `engine.py`, the engine's one public module. Nothing here reads a clock,
draws randomness or mutates its inputs: the same event on the same snapshot always yields
the same outcome, which is what `stateward verify` relies on when it replays a log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from stateward.domain import events as ev
from stateward.domain import registry
from stateward.domain.access import check_role, check_state_access, holds_role
from stateward.domain.branching import ON_ADVANCE
from stateward.domain.effects import (
    assign_user,
    cancelled_by_action,
    collect_children,
    completed_in_place,
    entry_effects,
    schedule_effects,
    spawn_effects,
    transition_effects,
    transition_template,
    unschedule_effects,
)
from stateward.domain.errors import (
    FORBIDDEN,
    GUARD_FAILED,
    INACTIVE_PROCESS,
    INVALID_INPUT,
    NO_APPLICABLE_ACTION,
    NOT_FOUND,
    POSTCONDITION_FAILED,
    TERMINAL_STATE,
    WRONG_STATE,
    DomainError,
)
from stateward.domain.forms import validate_fields
from stateward.domain.joins import PARENT_KEY, enter_await, parent_snapshot, record_spawns
from stateward.domain.model import (
    ACTIVE,
    CANCEL_TARGET,
    COMPLETED,
    STALE,
    SYSTEM_ACTOR,
    ActionDef,
    Actor,
    Definition,
    DomainEvent,
    Effects,
    Outcome,
    ProcessSnapshot,
    StateDef,
)
from stateward.domain.plan import Plan, plan_for
from stateward.domain.references import RefScope
from stateward.domain.routing import choose_route
from stateward.domain.starting import check_start

START = "$start"
SYSTEM = Actor(id=SYSTEM_ACTOR)


def start(
    definition: Definition,
    *,
    process_id: str,
    data: Mapping[str, Any],
    actor: Actor,
    ts: str,
    event_id: str,
    authorize: bool = True,
    parent: Mapping[str, Any] | None = None,
) -> Outcome:
    """`$start`: a new process in the initial state with `data` (data.state = initial).

    Entering the initial state has its usual effects (assignment, SLA, hook); a visitor
    may only start a workflow whose initial state is `public`; the workflow's `start`
    policy (DSL 2.1: roles, spawn_only) applies unless `authorize` is False (replay).
    """
    del process_id, event_id  # the runtime keys the new row; kept for a uniform signature
    if not isinstance(data, Mapping):
        raise DomainError(INVALID_INPUT, "start data must be an object", pointer="/data")
    initial = definition.states[definition.initial]
    if actor.is_visitor and initial.audience != "public":
        raise DomainError(FORBIDDEN, "visitors only start workflows whose initial state is public")
    if authorize:
        check_start(definition, actor)
    new = dict(data)
    new["state"] = initial.key
    if parent is not None:  # a spawned child keeps its parent's data for `parent.*`
        new[PARENT_KEY] = dict(parent)
    if initial.await_ is not None:
        enter_await(new, "", initial)
    domain_events = [DomainEvent(type=ev.WORKFLOW_STARTED, to_state=initial.key)]
    team, sla, hook = entry_effects(initial, ts, domain_events)
    status = ACTIVE
    if initial.terminal:
        status = COMPLETED
        domain_events.append(DomainEvent(type=ev.WORKFLOW_COMPLETED, to_state=initial.key))
    effects = Effects(open_assignment=team, sla=sla, run_hook=hook, completed=initial.terminal)
    begun = Outcome(START, initial.key, initial.key, status, new, effects, tuple(domain_events))
    if initial.assign_user is not None and not initial.terminal:
        begun = assign_user(begun, initial, new, {}, actor.as_value())
    return begun


def perform(
    definition: Definition,
    process: ProcessSnapshot,
    action: str,
    input: Mapping[str, Any],
    actor: Actor,
    ts: str,
    event_id: str,
    *,
    authorize: bool = True,
    check_form: bool = True,
) -> Outcome:
    """Perform `action` on `process` (DESIGN §5 steps 1–8) and return the outcome.

    Checks, in order: live status (INACTIVE_PROCESS), action exists (NOT_FOUND), current
    state not terminal (TERMINAL_STATE) and in `from` (WRONG_STATE), audience/claim/role
    (FORBIDDEN), form (INVALID_INPUT), `when` (GUARD_FAILED), then mutates and checks
    `then` (POSTCONDITION_FAILED). `authorize=False` skips step 3 (replay of events that
    were authorized when accepted).
    """
    plan = plan_for(definition)
    state = _live_state(plan, process)
    act = definition.actions.get(action)
    if act is None:
        raise DomainError(NOT_FOUND, f"action {action!r} does not exist in {definition.path}")
    from_states = act.from_states
    if from_states is not None and process.state not in from_states:
        raise DomainError(
            WRONG_STATE,
            f"action {action!r} is not available in state {process.state!r}",
            details={"state": process.state, "from": list(from_states)},
        )
    if authorize:
        check_state_access(state, actor, process.claimed_by)
        check_role(act, actor)
    return _execute(plan, process, state, act, input, actor, ts, event_id, check_form=check_form)


def advance(
    definition: Definition,
    process: ProcessSnapshot,
    input: Mapping[str, Any],
    actor: Actor,
    ts: str,
    event_id: str,
    hook_action: str | None = None,
    *,
    authorize: bool = True,
) -> Outcome:
    """Perform the first action out of the current state that `actor` may take and whose
    `when` holds (definition order, desugared branch rules included).

    Candidates are the actions that list the current state in `from` and have a `to`
    (self-effects and from-anywhere actions never "advance"). `hook_action` (a hook's
    `$action`) names the action instead. None applicable: NO_APPLICABLE_ACTION.
    """
    if hook_action is not None:
        return perform(
            definition, process, hook_action, input, actor, ts, event_id, authorize=authorize
        )
    plan = plan_for(definition)
    state = _live_state(plan, process)
    if authorize:
        check_state_access(state, actor, process.claimed_by)
    actor_value: Mapping[str, Any] | None = None
    data = process.data
    candidates = plan.candidates.get(process.state, ())
    if state.form is not None and candidates:
        # Seed §8 steps 3-4: the submission is validated and merged before routing, so
        # branch rules and guards see it.
        _check_form(state, input)
        data = merge_submission(state, data, input)
    missing_roles: list[ActionDef] = []
    for act in candidates:
        if authorize and not holds_role(act, actor):
            missing_roles.append(act)
            continue
        when_fn = act.when_fn
        if when_fn is not None:
            if actor_value is None:
                actor_value = actor.as_value()
            if not when_fn(data, input, actor_value):
                continue
        return _execute(plan, process, state, act, input, actor, ts, event_id, guarded=True)
    raise no_applicable(process.state, missing_roles)


def no_applicable(state: str, missing_roles: list[ActionDef]) -> DomainError:
    """NO_APPLICABLE_ACTION; when actions were skipped for a role the actor lacks, the
    message names them and the roles they need (a missing grant, not a failing guard)."""
    message = f"no action out of state {state!r} applies for this actor and input"
    details: dict[str, Any] = {"state": state}
    if missing_roles:
        needs = "; ".join(f"{a.key!r} needs {','.join(a.roles)!r}" for a in missing_roles)
        message += f" (you lack the role: {needs})"
        details["missingRoles"] = {a.key: list(a.roles) for a in missing_roles}
    return DomainError(NO_APPLICABLE_ACTION, message, details=details)


def _live_state(plan: Plan, process: ProcessSnapshot) -> StateDef:
    """The current state of a live, non-terminal process, or the matching DomainError."""
    status = process.status
    if status != ACTIVE and status != STALE:
        raise DomainError(
            INACTIVE_PROCESS,
            f"process {process.id} is {status}",
            details={"status": status},
        )
    state = plan.definition.states.get(process.state)
    if state is None:
        raise DomainError(WRONG_STATE, f"state {process.state!r} is not in the definition")
    if state.terminal:
        raise DomainError(TERMINAL_STATE, f"state {process.state!r} is terminal")
    return state


def _execute(
    plan: Plan,
    process: ProcessSnapshot,
    state: StateDef,
    act: ActionDef,
    input: Mapping[str, Any],
    actor: Actor,
    ts: str,
    event_id: str,
    *,
    guarded: bool = False,
    check_form: bool = True,
) -> Outcome:
    """Steps 4–8 for an authorized action: form, when, mutate, then, effects.

    `check_form=False`: the system routes on after a hook; the submission was validated
    and merged by the event that handed over to the hook."""
    key, to_key, bootstrap = act.key, act.to, plan.bootstrap
    data = process.data
    form_check = check_form and act.moves and to_key != CANCEL_TARGET  # a cancel fills no form
    if form_check and state.form is not None:
        _check_form(state, input)
        data = merge_submission(state, data, input)
    if bootstrap:
        registry.check_input(plan.definition.namespace, key, input)
    actor_value: Mapping[str, Any] | None = None
    when_fn = act.when_fn
    if when_fn is not None and not guarded:
        actor_value = actor.as_value()
        if not when_fn(data, input, actor_value):
            raise DomainError(GUARD_FAILED, f"the guard of {key!r} does not hold: {act.when}")
    scope = None
    if key in plan.scoped:
        if actor_value is None:
            actor_value = actor.as_value()
        parent = process.parent_data
        if parent is None and isinstance(data.get(PARENT_KEY), Mapping):
            parent = data[PARENT_KEY]
        scope = RefScope(data, actor_value, parent)
    new = plan.mutators[key](data, input, ts, scope)
    if bootstrap:
        new = registry.reduce(plan.definition.namespace, key, new, input, actor, ts)
    from_key = process.state
    if act.routes:
        if actor_value is None:
            actor_value = actor.as_value()
        to_key = choose_route(act, new, input, actor_value)
    spawns = spawn_effects(act, from_key, input, ts, event_id, scope) if act.spawn else ()
    if spawns:
        collect_children(new, spawns)
    if to_key is not None and to_key != CANCEL_TARGET:
        new["state"] = to_key
    if plan.joins:
        after = plan.definition.states.get(new.get("state", from_key))
        if to_key is not None and to_key != from_key:
            enter_await(new, from_key, after)
        record_spawns(new, spawns, after)
    if spawns:
        snapshot = parent_snapshot(new)
        spawns = tuple(replace(s, parent=snapshot) for s in spawns)
    then_fn = act.then_fn
    if then_fn is not None:
        if actor_value is None:
            actor_value = actor.as_value()
        if not then_fn(new, input, actor_value):
            raise DomainError(
                POSTCONDITION_FAILED, f"the postcondition of {key!r} fails: {act.then}"
            )
    if to_key == CANCEL_TARGET:
        return cancelled_by_action(state, key, new, input, spawns)
    if act.completes:
        return completed_in_place(state, key, new, spawns)
    if act.hook_phase is not None:
        return hook_pending(state, act, new, spawns)
    target = plan.definition.states.get(to_key) if to_key is not None else None
    personal = target is not None and target.assign_user is not None and to_key != from_key
    if not (spawns or act.schedule or act.unschedule or bootstrap or act.routes or personal):
        template: Any = plan.templates.get((key, from_key))
        if template is None:
            template = transition_template(plan, state, act)
            plan.templates[(key, from_key)] = template
        if template:
            return Outcome(key, from_key, template[0], template[1], new, template[2], template[3])
    schedules = schedule_effects(act, input, ts, scope) if act.schedule else ()
    unschedules = unschedule_effects(act) if act.unschedule else ()
    details = {ev.D_CHILDREN: [s.child_id for s in spawns]} if spawns else {}
    gov_events = registry.domain_events(key, input) if bootstrap else ()
    to_state, status, effects, domain_events = transition_effects(
        plan, state, act, ts, Effects(spawns=spawns, schedules=schedules, unschedules=unschedules),
        details, to_key,
    )  # fmt: skip
    outcome = Outcome(key, from_key, to_state, status, new, effects, (*domain_events, *gov_events))
    if personal and target is not None and not target.terminal:
        outcome = assign_user(outcome, target, new, input, actor_value or actor.as_value())
    return outcome


def execute_generated(
    plan: Plan, process: ProcessSnapshot, state: StateDef, act: ActionDef, ts: str, event_id: str
) -> Outcome:
    """A generated (routing) action performed by the system with no input; its rule
    already held (`auto_transition`, hook routing). No form: nobody submits here."""
    return _execute(
        plan, process, state, act, {}, SYSTEM, ts, event_id, guarded=True, check_form=False
    )


def hook_pending(
    state: StateDef, act: ActionDef, data: Mapping[str, Any], spawns: tuple[Any, ...]
) -> Outcome:
    """A hand-over to a hook (`on_advance`, or a dynamic state's routing hook): the
    instance stays, with the submission merged, and the runtime runs the hook after the
    commit; its recorded `$automate` event routes on (`lifecycle.automate`)."""
    hook = state.on_advance if act.hook_phase == ON_ADVANCE else state.hook
    details = {ev.D_HOOK: hook, "phase": act.hook_phase}
    updated = DomainEvent(ev.WORKFLOW_UPDATED, state.key, state.key, None, details)
    effects = Effects(spawns=spawns, run_hook=hook)
    return Outcome(act.key, state.key, state.key, ACTIVE, data, effects, (updated,))


def merge_submission(
    state: StateDef, data: Mapping[str, Any], input: Mapping[str, Any]
) -> Mapping[str, Any]:
    """Seed §8 step 4: the validated form fields merged (shallow) into the data; `state`
    and `$`-keys are never taken from a submission."""
    fields = input.get("fields")
    if state.form is None or not isinstance(fields, Mapping) or not fields:
        return data
    merged = dict(data)
    for name, value in fields.items():
        if name != "state" and not name.startswith("$") and state.form.field(name) is not None:
            merged[name] = value
    return merged


def _check_form(state: StateDef, input: Mapping[str, Any]) -> None:
    """Step 4: `input.fields` against the form of the state being left."""
    assert state.form is not None
    fields = input.get("fields", {})
    if fields is None:
        fields = {}
    if not isinstance(fields, Mapping):
        raise DomainError(INVALID_INPUT, "input.fields must be an object", pointer="/fields")
    problems = validate_fields(state.form, fields)
    flat = sorted(k for k in input if k != "fields" and state.form.field(k) is not None)
    if problems and flat and "fields" not in input:
        raise DomainError(
            INVALID_INPUT,
            f"form values go under input.fields, not at the top of the input: send "
            f'{{"fields": {{{", ".join(repr(k) for k in flat)}: ...}}}}',
            pointer="/fields",
            problems=problems,
        )
    if problems:
        first = problems[0]
        raise DomainError(
            INVALID_INPUT,
            f"{len(problems)} invalid field(s); first: {first.pointer}: {first.message}",
            pointer=first.pointer,
            problems=problems,
        )
