"""Assignments as user tasks (issue 16, as Camunda's user tasks): candidates, priority,
due and follow-up dates, declared in a state's `assign` object.

    "assign": {"team": "analyst", "candidates": ["<actor id>", ...], "priority": 50,
               "due": 86400, "followUp": {"$ref": "data.review_at"}}

- `team` (required in this form): the queue, as `assign: "<team>"`.
- `candidates`: actor ids who may claim the assignment without the team's role and who
  see it (while unassigned) in `myAssignments`.
- `priority`: an integer, or `{"$ref": "data.<path>"}` to an integer (higher = more urgent).
- `due` / `followUp`: seconds after the state was entered (a number), or a reference into
  the data to a number of seconds or to an ISO 8601 timestamp with an offset.

References read the instance data after the entering event. A reference that is missing
or of another type leaves the field empty (null) rather than refusing the transition: a
task field is advice to people, not a guard. Pure: the entry time is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import Problem
from stateward.domain.references import parse_reference

TASK_KEYS = ("team", "candidates", "priority", "due", "followUp")
MAX_CANDIDATES = 50
#: Bounds of a priority and of a relative date (seconds), so a value always fits the column.
MAX_PRIORITY = 2**31 - 1
MAX_SECONDS = 100 * 366 * 86400


@dataclass(frozen=True)
class TaskSpec:
    """The task fields of a state's `assign` object, as authored (checked)."""

    candidates: tuple[str, ...] = ()
    priority: Any = None  # int or a data reference
    due: Any = None  # seconds or a data reference
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
    if priority is not None and not (
        (_is_int(priority) and abs(priority) <= MAX_PRIORITY) or _data_ref(priority)
    ):
        bad("priority", '\'assign.priority\' must be an integer or {"$ref": "data.<path>"}')
        priority = None
    dates = {}
    for key in ("due", "followUp"):
        value = raw.get(key)
        if value is not None and not (
            (_is_seconds(value) and 0 <= value <= MAX_SECONDS) or _data_ref(value)
        ):
            bad(key, f"'assign.{key}' must be seconds after entry (a number >= 0) or "
                '{"$ref": "data.<path>"}')  # fmt: skip
            value = None
        dates[key] = value
    spec = TaskSpec(tuple(dict.fromkeys(candidates)), priority, dates["due"], dates["followUp"])
    return team, spec, found


def _lookup(data: Mapping[str, Any], value: Any) -> Any:
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
    if _is_seconds(value) and 0 <= value <= MAX_SECONDS:
        return entered_at + timedelta(seconds=float(value))
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return None
        return when if when.tzinfo is not None else None
    return None


def task_fields(spec: TaskSpec | None, data: Mapping[str, Any], entered_at: datetime) -> TaskFields:
    """The task fields of an assignment opened at `entered_at` with instance `data`."""
    if spec is None:
        return TaskFields()
    priority = _lookup(data, spec.priority)
    if not (_is_int(priority) and abs(priority) <= MAX_PRIORITY):
        priority = None
    due = None if spec.due is None else _instant(_lookup(data, spec.due), entered_at)
    follow = None if spec.follow_up is None else _instant(_lookup(data, spec.follow_up), entered_at)
    return TaskFields(spec.candidates, priority, due, follow)


def candidates_of(values: Sequence[str] | None) -> tuple[str, ...]:
    """Candidate users as stored (a JSON list or NULL) as a tuple."""
    return tuple(values or ())
