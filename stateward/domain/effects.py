"""Effects of an action beyond data (DESIGN §5 step 8): spawns, timers, state entry/exit.

Pure helpers of `engine.py`. Child ids are derived from the event id, deadlines from the
event's timestamp, so replaying a log reproduces every effect exactly.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from stateward.domain import events as ev
from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.jsonvalues import json_kind
from stateward.domain.model import (
    ACTIVE,
    CANCEL_TARGET,
    CANCELLED,
    COMPLETED,
    ActionDef,
    DomainEvent,
    Effects,
    Outcome,
    ScheduleEffect,
    SlaEffect,
    SpawnEffect,
    StateDef,
    UnscheduleEffect,
)
from stateward.domain.mutations import resolve_value
from stateward.domain.plan import Plan
from stateward.domain.references import RefScope
from stateward.domain.timing import add_seconds, normalize_ts

#: Namespace of child ids: uuid5(NAMESPACE_URL, "stateward:<event id>:<spawn index>").
SPAWN_NAMESPACE = uuid.NAMESPACE_URL
SLA_WARNING_FRACTION = 0.8
NO_EFFECTS = Effects()


def child_id(event_id: str, index: int, element: int | None = None) -> str:
    """The id of the `index`-th child spawned by event `event_id` (deterministic UUID);
    a multi-instance item (`each`) numbers its children by `element` too."""
    if element is not None:
        return str(uuid.uuid5(SPAWN_NAMESPACE, f"stateward:{event_id}:{index}:{element}"))
    return str(uuid.uuid5(SPAWN_NAMESPACE, f"stateward:{event_id}:{index}"))


def spawn_effects(
    action: ActionDef,
    from_state: str,
    input: Mapping[str, Any],
    ts: str,
    event_id: str,
    scope: RefScope | None = None,
) -> tuple[SpawnEffect, ...]:
    """The children this action starts; items with `from` fire only out of those states.

    The index in the id is the item's position in the action's `spawn` list, so skipping
    an item never renumbers the others.
    """
    out = []
    for index, spec in enumerate(action.spawn):
        if spec.from_states is not None and from_state not in spec.from_states:
            continue
        data = {key: resolve_value(value, input, ts, scope) for key, value in spec.data.items()}
        if spec.each is None:
            out.append(
                SpawnEffect(
                    child_id=child_id(event_id, index),
                    workflow=spec.workflow,
                    state=spec.to,
                    data=data,
                    as_key=spec.as_key,
                )
            )
            continue
        items = resolve_value(spec.each, input, ts, scope)
        if not isinstance(items, list):
            raise DomainError(
                INVALID_INPUT,
                f"spawn 'each' of {action.key!r} resolves to {json_kind(items)}, not a list",
                pointer=f"/actions/{action.key}/spawn/{index}/each",
            )
        out.extend(
            SpawnEffect(
                child_id=child_id(event_id, index, n),
                workflow=spec.workflow,
                state=spec.to,
                data={**data, "item": item, "index": n},
                as_key=spec.as_key,
            )
            for n, item in enumerate(items)
        )
    return tuple(out)


def collect_children(data: dict[str, Any], spawns: tuple[SpawnEffect, ...]) -> None:
    """Append each child's id to its `as` key of the parent's (new, owned) data."""
    for spawn in spawns:
        if spawn.as_key is None:
            continue
        current = data.get(spawn.as_key)
        ids = list(current) if isinstance(current, list) else []
        ids.append(spawn.child_id)
        data[spawn.as_key] = ids


def schedule_effects(
    action: ActionDef, input: Mapping[str, Any], ts: str, scope: RefScope | None = None
) -> tuple[ScheduleEffect, ...]:
    """Timers to register: `due_at` = ts + after, or the resolved `at` (normalized)."""
    out = []
    for index, spec in enumerate(action.schedule):
        if spec.after is not None:
            out.append(
                ScheduleEffect(
                    action=spec.action,
                    due_at=add_seconds(ts, spec.after),
                    key=spec.key,
                    after=spec.after,
                )
            )
            continue
        at = resolve_value(spec.at, input, ts, scope)
        if at is None:
            raise DomainError(
                INVALID_INPUT,
                f"schedule of {spec.action!r} resolves `at` to null",
                pointer=f"/actions/{action.key}/schedule/{index}/at",
            )
        due = normalize_ts(at, pointer=f"/actions/{action.key}/schedule/{index}/at")
        out.append(ScheduleEffect(action=spec.action, due_at=due, key=spec.key, at=due))
    return tuple(out)


def unschedule_effects(action: ActionDef) -> tuple[UnscheduleEffect, ...]:
    """Timers to drop, as declared."""
    return tuple(UnscheduleEffect(key=u.key, action=u.action) for u in action.unschedule)


def sla_effect(state: StateDef, ts: str) -> SlaEffect | None:
    """SLA deadlines when entering `state`: warning at `sla_warning` (default 80 %) and
    breach at 100 % of the budget."""
    seconds = state.sla_seconds
    if seconds is None or state.terminal:
        return None
    fraction = state.sla_warning if state.sla_warning is not None else SLA_WARNING_FRACTION
    return SlaEffect(
        state=state.key,
        warn_at=add_seconds(ts, seconds * fraction),
        due_at=add_seconds(ts, seconds),
    )


def assign_user(
    outcome: Outcome,
    state: StateDef,
    data: Mapping[str, Any],
    input: Mapping[str, Any],
    actor: Mapping[str, Any],
) -> Outcome:
    """`outcome` with the person-assignment of entering `state` (`assign: {"user": ...}`):
    a literal actor id, or a reference into `data` (the data *after* the event's mutation),
    the input or the actor.
    A reference that resolves to anything but a non-empty string is INVALID_INPUT."""
    user = resolve_value(state.assign_user, input, "", RefScope(data, actor))
    if not isinstance(user, str) or not user:
        raise DomainError(
            INVALID_INPUT,
            f"state {state.key!r} is assigned to {state.assign_user!r}, which resolves to "
            f"{user!r}, not an actor id",
        )
    assigned = DomainEvent(
        ev.WORKFLOW_ASSIGNED, outcome.from_state, state.key, None, {"assignee": user}
    )
    effects = replace(outcome.effects, assignee=user)
    return replace(outcome, effects=effects, events=(*outcome.events, assigned))


def cancelled_by_action(
    state: StateDef,
    action: str,
    data: Mapping[str, Any],
    input: Mapping[str, Any],
    spawns: tuple[SpawnEffect, ...],
) -> Outcome:
    """An action with `"to": "$cancel"`: the instance ends `cancelled` in its current state
    (data mutated as the action says), with `input.reason` as the reason when given."""
    reason = input.get("reason")
    details: dict[str, Any] = {ev.D_REASON: reason} if isinstance(reason, str) and reason else {}
    events = [DomainEvent(ev.WORKFLOW_CANCELLED, state.key, state.key, None, details)]
    if state.assigned:
        events.append(DomainEvent(ev.ASSIGNMENT_CANCELLED, state.key, state.key, state.assign))
    sla = SlaEffect(state=state.key, warn_at=None, due_at=None) if state.sla_seconds else None
    effects = Effects(spawns=spawns, cancel_assignments=state.assigned, sla=sla)
    return Outcome(action, state.key, state.key, CANCELLED, data, effects, tuple(events))


def completed_in_place(
    state: StateDef,
    action: str,
    data: Mapping[str, Any],
    spawns: tuple[SpawnEffect, ...],
) -> Outcome:
    """Advancing past the last state (seed §8 step 7): the instance ends `completed` in
    that state; its open assignments are cancelled and its SLA cleared."""
    events = [DomainEvent(ev.WORKFLOW_COMPLETED, state.key, state.key)]
    if state.assigned:
        events.append(DomainEvent(ev.ASSIGNMENT_CANCELLED, state.key, state.key, state.assign))
    sla = SlaEffect(state=state.key, warn_at=None, due_at=None) if state.sla_seconds else None
    effects = Effects(spawns=spawns, cancel_assignments=state.assigned, sla=sla, completed=True)
    return Outcome(action, state.key, state.key, COMPLETED, data, effects, tuple(events))


def entry_effects(
    state: StateDef, ts: str, domain_events: list[DomainEvent]
) -> tuple[str | None, SlaEffect | None, str | None]:
    """(assignment team, SLA deadlines, hook to run) of entering `state`.

    Appends `workflow.assigned` to `domain_events` when an assignment opens, and
    `workflow.delegated` when the state is handed to a surface (`mode: delegated`).
    """
    team = state.assign if not state.terminal else None
    if team is not None:
        domain_events.append(DomainEvent(type=ev.WORKFLOW_ASSIGNED, to_state=state.key, team=team))
    if state.mode == "delegated" and state.surface is not None and not state.terminal:
        details = {ev.D_SURFACE: state.surface}
        domain_events.append(DomainEvent(ev.WORKFLOW_DELEGATED, None, state.key, None, details))
    hook = state.hook if state.audience == "system" and not state.terminal else None
    return team, sla_effect(state, ts), hook


_NO_DETAILS: Mapping[str, Any] = MappingProxyType({})


def transition_template(plan: Plan, state: StateDef, act: ActionDef) -> tuple[Any, ...] | bool:
    """The event-independent (state, status, effects, events) of `act` out of `state`,
    cached per definition by the engine; False when SLA deadlines (computed from the
    event's time) are involved."""
    if act.routes or act.to == CANCEL_TARGET:
        return False
    if state.assign_user is not None and act.to is not None and act.to != state.key:
        return False
    if act.to is not None and act.to != state.key:
        target = plan.definition.states[act.to]
        timed = target.sla_seconds is not None and not target.terminal
        if timed or state.sla_seconds is not None:
            return False
    return transition_effects(plan, state, act, None, NO_EFFECTS, _NO_DETAILS)


def transition_effects(
    plan: Plan,
    state: StateDef,
    act: ActionDef,
    ts: str | None,
    own: Effects,
    details: Mapping[str, Any],
    to: str | None = None,
) -> tuple[str, str, Effects, tuple[DomainEvent, ...]]:
    """(new state, status, effects, events) of `act` out of `state` (to `to`, default the
    action's `to`); `own` carries the action's spawns and timers. `ts` None only when no
    SLA is involved (templates)."""
    from_key, to_key = state.key, to if to is not None else act.to
    if to_key is None or to_key == from_key:
        updated = DomainEvent(ev.WORKFLOW_UPDATED, from_key, from_key, None, details)
        return from_key, ACTIVE, own, (updated,)
    target = plan.definition.states[to_key]
    domain_events = [DomainEvent(ev.WORKFLOW_ADVANCED, from_key, to_key, None, details)]
    leaving_team = state.assign
    if state.assigned:
        domain_events.append(DomainEvent(ev.ASSIGNMENT_CANCELLED, from_key, to_key, leaving_team))
    team, sla, hook = entry_effects(target, ts or "", domain_events)
    if sla is None and state.sla_seconds is not None:
        sla = SlaEffect(state=to_key, warn_at=None, due_at=None)
    status = ACTIVE
    if target.terminal:
        status = COMPLETED
        domain_events.append(DomainEvent(ev.WORKFLOW_COMPLETED, from_key, to_key))
    effects = replace(
        own, open_assignment=team, cancel_assignments=state.assigned, sla=sla,
        run_hook=hook, completed=target.terminal,
    )  # fmt: skip
    if effects == NO_EFFECTS:
        effects = NO_EFFECTS
    return to_key, status, effects, tuple(domain_events)
