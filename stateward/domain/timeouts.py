"""Timers that belong to a state or to the instance (DSL 2.1): `timeout`, `idle_timeout`.

A state's `timeout: {"seconds": N | {"$ref": "<path>"} | "<value expression>", "action":
"<action>"}` is armed when
the state is entered and cancelled when it is left (BPMN's boundary timer); the instance's
`idle_timeout` (same shape) is re-armed by every event while the instance is live. Both
are ordinary timers (`schedules` rows fired as `$timer` by the scheduler), keyed so that
re-arming replaces and leaving cancels: `$timeout:<state>` and `$idle`. `arm_timers` adds
them to any outcome, so every kind of event (business, kernel, automated) keeps them right.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import INVALID_INPUT, DomainError, Problem
from stateward.domain.jsonvalues import json_kind
from stateward.domain.model import (
    LIVE_STATUSES,
    Definition,
    Outcome,
    ScheduleEffect,
    TimeoutSpec,
    UnscheduleEffect,
)
from stateward.domain.references import RefScope, parse_reference, read_reference
from stateward.domain.timing import add_seconds
from stateward.domain.value_expressions import NULL, NUMBER, compile_value

IDLE_KEY = "$idle"
TIMEOUT_KEYS = ("seconds", "action")


def timeout_key(state: str) -> str:
    """The timer key of a state's `timeout`."""
    return f"$timeout:{state}"


def parse_timeout(
    raw: Any, at: str, action_keys: Sequence[str] | None, found: list[Problem]
) -> TimeoutSpec | None:
    """Validate `{"seconds": N | {"$ref"}, "action": "<action>"}`; problems are INVALID_FIELD."""

    def bad(message: str, where: str = at) -> None:
        found.append(Problem(errors.INVALID_FIELD, message, where))

    if not isinstance(raw, dict):
        bad('a timeout is an object {"seconds": N, "action": "<action>"}')
        return None
    for key in raw:
        if key not in TIMEOUT_KEYS:
            bad(f"unknown timeout field {key!r} (allowed: seconds, action)", f"{at}/{key}")
    action = raw.get("action")
    if not isinstance(action, str) or (action_keys is not None and action not in action_keys):
        bad(f"timeout 'action' {action!r} is not an action of this workflow", f"{at}/action")
        action = None
    seconds: Any = raw.get("seconds")
    if isinstance(seconds, str):
        expression = _expression(seconds, f"{at}/seconds", found)
        if expression is None or action is None:
            return None
        return TimeoutSpec(action=action, expression=expression)
    ref = parse_reference(seconds)
    number = json_kind(seconds) == "number"
    if not (ref is not None or (number and seconds > 0)):
        bad(
            "timeout 'seconds' must be a number > 0, a reference "
            '{"$ref": "data.<path>"} to one, or a value expression giving seconds '
            '(e.g. "days * 86400")',
            f"{at}/seconds",
        )
        return None
    if action is None:
        return None
    if ref is not None:
        return TimeoutSpec(action=action, ref=seconds)
    return TimeoutSpec(action=action, seconds=float(seconds))


def _expression(text: str, at: str, found: list[Problem]) -> str | None:
    """`seconds` as a value expression (the language of task fields: data paths,
    arithmetic, CASE WHEN): its text, or None after adding its problem — INVALID_EXPRESSION
    for text outside the grammar, INVALID_FIELD for one that can never give seconds."""
    try:
        compiled = compile_value(text)
    except DomainError as exc:
        found.append(Problem(errors.INVALID_EXPRESSION, f"timeout 'seconds': {exc.message}", at))
        return None
    problem = None
    wrong = compiled.kinds - {NUMBER, NULL, "any"}
    if wrong:
        problem = f"can give a {' or '.join(sorted(wrong))}; it must give seconds"
    elif compiled.kinds == {NULL}:
        problem = "always gives NULL; it must give seconds"
    elif compiled.constant:
        value = compiled.evaluate({})
        if not (json_kind(value) == "number" and value > 0):
            problem = f"gives {value!r}; it must give a number of seconds > 0"
    if problem is not None:
        found.append(Problem(errors.INVALID_FIELD, f"timeout 'seconds' {text!r} {problem}", at))
        return None
    return text


def _seconds(spec: TimeoutSpec, data: Mapping[str, Any]) -> float | None:
    """The seconds `spec` waits with the instance data `data` (literal N, a `{"$ref"}` or
    a value expression); None when it resolves to NULL (no timer). INVALID_INPUT when it
    resolves to anything but seconds >= 0."""
    if spec.seconds is not None:
        return spec.seconds
    if spec.expression is not None:
        value = compile_value(spec.expression).evaluate(data)
    else:
        ref = parse_reference(spec.ref)
        value = read_reference(ref[0], ref[1], {}, RefScope(data)) if ref is not None else None
    if value is None:
        return None  # nothing to wait for: no timer
    if json_kind(value) != "number" or not math.isfinite(value) or value < 0:
        raise DomainError(
            INVALID_INPUT, f"the timeout of {spec.action!r} resolves to {value!r}, not seconds"
        )
    return float(value)


def arm_timers(
    definition: Definition, before: str | None, outcome: Outcome, ts: str, *, timed: bool
) -> Outcome:
    """`outcome` plus the timers of its state change and the instance's idle timer.

    `before` is the state before the event (None for a `$start`). `timed` says whether the
    definition has any timeout at all (the engine precomputes it; False returns as is).
    """
    if not timed:
        return outcome
    schedules: list[ScheduleEffect] = []
    unschedules: list[UnscheduleEffect] = []
    live = outcome.status in LIVE_STATUSES
    if before is None or outcome.state != before:
        left = definition.states.get(before) if before is not None else None
        if left is not None and left.timeout is not None:
            unschedules.append(UnscheduleEffect(key=timeout_key(left.key)))
        entered = definition.states.get(outcome.state)
        if live and entered is not None and entered.timeout is not None:
            schedules.extend(timeout_timer(entered.timeout, timeout_key(entered.key), outcome, ts))
    if live and definition.idle_timeout is not None:
        schedules.extend(timeout_timer(definition.idle_timeout, IDLE_KEY, outcome, ts))
    if not schedules and not unschedules:
        return outcome
    effects = replace(
        outcome.effects,
        schedules=(*outcome.effects.schedules, *schedules),
        unschedules=(*outcome.effects.unschedules, *unschedules),
    )
    return replace(outcome, effects=effects)


def timeout_timer(spec: TimeoutSpec, key: str, outcome: Outcome, ts: str) -> list[ScheduleEffect]:
    """The timer `spec` arms under `key`, counted from `ts`, its seconds read from
    `outcome.data`: none when they resolve to NULL, INVALID_INPUT when not seconds >= 0
    (state entry here; `$migrate` from the kept entry time)."""
    seconds = _seconds(spec, outcome.data)
    if seconds is None:
        return []
    return [
        ScheduleEffect(action=spec.action, due_at=add_seconds(ts, seconds), key=key, after=seconds)
    ]
