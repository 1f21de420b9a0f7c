"""Assignments as user tasks (issue 16, as Camunda's user tasks): candidates, priority,
due and follow-up dates, declared in a state's `assign` object.

    "assign": {"team": "analyst", "candidates": ["<actor id>", ...],
               "priority": "CASE WHEN amount > 10000 THEN 90 ELSE 50 END",
               "due": 86400, "followUp": "review_at - 3600"}

- `team` (required in this form): the queue, as `assign: "<team>"`.
- `candidates`: actor ids who may claim the assignment without the team's role and who
  see it (while unassigned) in `myAssignments`.
- `priority`: an integer, a value expression (a string, `domain.value_expressions`)
  giving a number, or `{"$ref": "data.<path>"}` to an integer (higher = more urgent). A
  computed priority is rounded down to an integer.
- `due` / `followUp`: seconds after the state was entered (a number), or a value
  expression / reference giving a number of seconds after entry or a timestamp (ISO 8601
  with an offset).

Expressions and references read the instance data after the entering event. One that
gives NULL, a value of the wrong kind or out of range leaves the field empty (null) rather
than refusing the transition: a task field is advice to people, not a guard. What can be
decided at validation is: an expression that does not parse or reads `input.`/`actor.` is
INVALID_EXPRESSION; one that can never give what the field takes (a priority that is a
timestamp, a constant out of range) is INVALID_FIELD. Pure: the entry time is given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import Problem
from stateward.domain.references import parse_reference
from stateward.domain.value_expressions import (
    NULL,
    NUMBER,
    TIMESTAMP,
    ValueExpression,
    as_instant,
    compile_value,
)

TASK_KEYS = ("team", "candidates", "priority", "due", "followUp")
MAX_CANDIDATES = 50
#: Bounds of a priority and of a relative date (seconds), so a value always fits the column.
MAX_PRIORITY = 2**31 - 1
MAX_SECONDS = 100 * 366 * 86400


@dataclass(frozen=True)
class TaskSpec:
    """The task fields of a state's `assign` object, as authored (checked)."""

    candidates: tuple[str, ...] = ()
    priority: Any = None  # int, a ValueExpression or a data reference
    due: Any = None  # seconds, a ValueExpression or a data reference
    follow_up: Any = None


@dataclass(frozen=True)
class TaskFields:
    """The task fields of one assignment, evaluated when it opened."""

    candidates: tuple[str, ...] = ()
    priority: int | None = None
    due_at: datetime | None = None
    follow_up_at: datetime | None = None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seconds(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _data_ref(value: Any) -> bool:
    ref = parse_reference(value)
    return ref is not None and ref[0] == "data"


def parse_task(raw: Mapping[str, Any], at: str) -> tuple[str | None, TaskSpec, list[Problem]]:
    """`(team, spec, problems)` of an `assign` object with a `team` (pointers under `at`)."""
    found: list[Problem] = []

    def bad(key: str, message: str) -> None:
        found.append(Problem(errors.INVALID_FIELD, message, f"{at}/{key}"))

    for key in raw:
        if key not in TASK_KEYS:
            bad(key, f"unknown assign field {key!r} (allowed: {', '.join(TASK_KEYS)})")
    team = raw.get("team")
    if not isinstance(team, str) or not team.strip():
        bad("team", "'assign.team' must be a team name")
        team = None
    candidates = raw.get("candidates", [])
    if (
        not isinstance(candidates, list)
        or len(candidates) > MAX_CANDIDATES
        or not all(isinstance(c, str) and c.strip() for c in candidates)
    ):
        bad("candidates", f"'assign.candidates' must be a list of up to {MAX_CANDIDATES} "
            "actor ids")  # fmt: skip
        candidates = []
    priority = raw.get("priority")
    if isinstance(priority, str):
        priority = _expression(priority, "priority", f"{at}/priority", found)
    elif priority is not None and not (
        (_is_int(priority) and abs(priority) <= MAX_PRIORITY) or _data_ref(priority)
    ):
        bad("priority", "'assign.priority' must be an integer, an expression giving a number "
            'or {"$ref": "data.<path>"}')  # fmt: skip
        priority = None
    dates = {}
    for key in ("due", "followUp"):
        value = raw.get(key)
        if isinstance(value, str):
            value = _expression(value, key, f"{at}/{key}", found)
        elif value is not None and not (
            (_is_seconds(value) and 0 <= value <= MAX_SECONDS) or _data_ref(value)
        ):
            bad(key, f"'assign.{key}' must be seconds after entry (a number >= 0), an "
                'expression giving seconds or a timestamp, or {"$ref": "data.<path>"}')  # fmt: skip
            value = None
        dates[key] = value
    spec = TaskSpec(tuple(dict.fromkeys(candidates)), priority, dates["due"], dates["followUp"])
    return team, spec, found


#: What each task field's expression may give (besides NULL and data known at run time).
_TAKES = {"priority": {NUMBER}, "due": {NUMBER, TIMESTAMP}, "followUp": {NUMBER, TIMESTAMP}}
#: A fixed entry time for judging constant expressions at validation.
_SOME_ENTRY = datetime(2000, 1, 1, tzinfo=UTC)


def _expression(text: str, key: str, pointer: str, found: list[Problem]) -> ValueExpression | None:
    """The compiled expression of task field `key`, or None after adding its problem."""
    try:
        compiled = compile_value(text)
    except errors.DomainError as exc:
        found.append(Problem(errors.INVALID_EXPRESSION, f"'assign.{key}': {exc.message}",
                             pointer))  # fmt: skip
        return None
    takes = _TAKES[key]
    wanted = "a number" if key == "priority" else "seconds after entry or a timestamp"
    wrong = compiled.kinds - takes - {NULL, "any"}
    problem = None
    if wrong:
        problem = f"can give a {' or '.join(sorted(wrong))}; it must give {wanted}"
    elif compiled.kinds == {NULL}:
        problem = f"always gives NULL; it must give {wanted}"
    elif compiled.constant:
        value = compiled.evaluate({})
        ok = (
            _priority(value, strict=True) is not None
            if key == "priority"
            else as_instant(value, _SOME_ENTRY, MAX_SECONDS) is not None
        )
        if not ok:
            bounds = (f"an integer within ±{MAX_PRIORITY}" if key == "priority"
                      else f"0 to {MAX_SECONDS} seconds or a timestamp")  # fmt: skip
            problem = f"gives {value!r}; it must give {bounds}"
    if problem is not None:
        found.append(Problem(errors.INVALID_FIELD, f"'assign.{key}' {text!r} {problem}", pointer))
        return None
    return compiled


def _priority(value: Any, strict: bool = False) -> int | None:
    """A priority from a value: an integer (a fractional number rounded down unless
    `strict`) within ±MAX_PRIORITY, else None."""
    if not _is_seconds(value) or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, float):
        if strict and not value.is_integer():
            return None
        value = math.floor(value)
    return value if abs(value) <= MAX_PRIORITY else None


def _lookup(data: Mapping[str, Any], value: Any) -> Any:
    if isinstance(value, ValueExpression):
        return value.evaluate(data)
    ref = parse_reference(value)
    if ref is None:
        return value
    found: Any = data
    for key in ref[1]:
        if not isinstance(found, Mapping) or key not in found:
            return None
        found = found[key]
    return found


def _instant(value: Any, entered_at: datetime) -> datetime | None:
    return as_instant(value, entered_at, MAX_SECONDS)


def task_fields(spec: TaskSpec | None, data: Mapping[str, Any], entered_at: datetime) -> TaskFields:
    """The task fields of an assignment opened at `entered_at` with instance `data`."""
    if spec is None:
        return TaskFields()
    if isinstance(spec.priority, ValueExpression):
        priority = _priority(spec.priority.evaluate(data))
    else:  # a literal or a reference: an integer as it is, else nothing
        found = _lookup(data, spec.priority)
        priority = found if _is_int(found) and abs(found) <= MAX_PRIORITY else None
    due = None if spec.due is None else _instant(_lookup(data, spec.due), entered_at)
    follow = None if spec.follow_up is None else _instant(_lookup(data, spec.follow_up), entered_at)
    return TaskFields(spec.candidates, priority, due, follow)


def candidates_of(values: Sequence[str] | None) -> tuple[str, ...]:
    """Candidate users as stored (a JSON list or NULL) as a tuple."""
    return tuple(values or ())
