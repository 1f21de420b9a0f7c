"""Spawn, schedule and unschedule items of an action (DESIGN §2.1, §4): validate and build.

They come from the action-level `spawn`/`schedule`/`unschedule` lists and from `$spawn`/
`$schedule`/`$unschedule` inside `mutate`; both forms mean the same and are merged by the
definition loader. A single object is accepted where a list is expected (one item).
Shape problems carry the caller's code (INVALID_FIELD at action level, INVALID_MUTATION
inside `mutate`); an unusable spawn target is always UNRESOLVED_SPAWN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import Problem
from stateward.domain.model import ScheduleSpec, SpawnSpec, UnscheduleSpec
from stateward.domain.mutations import input_reference, pointer_join
from stateward.domain.paths import is_canonical_path
from stateward.domain.references import parse_reference, scan_values

SPAWN_KEYS = ("workflow", "to", "data", "as", "from", "each")
SCHEDULE_KEYS = ("action", "after", "at", "key")
UNSCHEDULE_KEYS = ("key", "action")


@dataclass(frozen=True)
class SpecContext:
    """What item validation needs to know about the workflow around it."""

    #: None when `states` is missing or invalid: state references are not checked.
    state_keys: Sequence[str] | None
    action_keys: Sequence[str]
    own_path: str | None
    #: None: do not check that spawn targets exist (only their shape).
    deployed: Callable[[str], bool] | None


def _items(raw: Any, at: str, code: str, what: str, found: list[Problem]) -> list[tuple[str, Any]]:
    if isinstance(raw, dict):
        return [(at, raw)]
    if not isinstance(raw, list):
        found.append(Problem(code, f"{what} must be an array of objects (or one object)", at))
        return []
    return [(pointer_join(at, str(i)), item) for i, item in enumerate(raw)]


def _shape(item: Any, at: str, keys: Sequence[str], code: str, found: list[Problem]) -> bool:
    """True when `item` is an object (its unknown keys are reported); False otherwise."""
    if not isinstance(item, dict):
        found.append(Problem(code, "must be an object", at))
        return False
    found.extend(
        Problem(code, f"unknown key {key!r} (allowed: {', '.join(keys)})", pointer_join(at, key))
        for key in item
        if key not in keys
    )
    return True


def _text(item: dict[str, Any], key: str, at: str, code: str, found: list[Problem]) -> bool:
    value = item.get(key)
    if key in item and (not isinstance(value, str) or not value):
        found.append(Problem(code, f"{key!r} must be a non-empty string", pointer_join(at, key)))
        return False
    return True


def parse_spawns(
    raw: Any, at: str, ctx: SpecContext, code: str
) -> tuple[list[SpawnSpec], list[Problem]]:
    """Validate spawn items; return the specs and the problems found."""
    found: list[Problem] = []
    notes: list[Problem] = []  # warnings: they never drop the item
    specs: list[SpawnSpec] = []
    for where, item in _items(raw, at, code, "spawn", found):
        before = len(found)
        if not _shape(item, where, SPAWN_KEYS, code, found):
            continue
        workflow = item.get("workflow")
        _spawn_target(workflow, pointer_join(where, "workflow"), ctx, found)
        for key in ("to", "as"):
            _text(item, key, where, code, found)
        if "data" in item and not isinstance(item["data"], dict):
            found.append(
                Problem(
                    code,
                    "spawn 'data' must be an object of values or input references",
                    pointer_join(where, "data"),
                )
            )
        elif "data" in item:
            warnings = scan_values(item["data"], pointer_join(where, "data"), code)
            found.extend(p for p in warnings if p.severity == "error")
            notes.extend(p for p in warnings if p.severity == "warning")
        from_states = _from_states(item, where, ctx, code, found)
        each = item.get("each")
        if "each" in item and parse_reference(each) is None and input_reference(each) is None:
            found.append(
                Problem(
                    code,
                    'spawn \'each\' must reference a list: {"$ref": "data.<path>"} or '
                    "'input.<path>' (one child per element)",
                    pointer_join(where, "each"),
                )
            )
        if len(found) == before:
            specs.append(
                SpawnSpec(
                    workflow=workflow,
                    to=item.get("to"),
                    data=dict(item.get("data") or {}),
                    as_key=item.get("as"),
                    from_states=from_states,
                    each=each,
                )
            )
    return specs, found + notes


def _spawn_target(workflow: Any, at: str, ctx: SpecContext, found: list[Problem]) -> None:
    if not isinstance(workflow, str) or not is_canonical_path(workflow):
        found.append(
            Problem(
                errors.UNRESOLVED_SPAWN,
                f"spawn workflow {workflow!r} is not a canonical workflow path "
                "(full path like 'case/review/kyc-review'; no relative names)",
                at,
            )
        )
    elif ctx.deployed is not None and workflow != ctx.own_path and not ctx.deployed(workflow):
        found.append(
            Problem(errors.UNRESOLVED_SPAWN, f"spawn workflow {workflow!r} is not deployed", at)
        )


def _from_states(
    item: dict[str, Any], where: str, ctx: SpecContext, code: str, found: list[Problem]
) -> tuple[str, ...] | None:
    if "from" not in item:
        return None
    raw = item["from"]
    at = pointer_join(where, "from")
    keys = [raw] if isinstance(raw, str) else raw
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        found.append(Problem(code, "'from' must be a state key or a non-empty array of them", at))
        return None
    for i, key in enumerate(keys):
        if ctx.state_keys is not None and key not in ctx.state_keys:
            where_key = at if isinstance(raw, str) else pointer_join(at, str(i))
            found.append(
                Problem(errors.UNKNOWN_STATE, f"'from' names unknown state {key!r}", where_key)
            )
    return tuple(keys)


def parse_schedules(
    raw: Any, at: str, ctx: SpecContext, code: str
) -> tuple[list[ScheduleSpec], list[Problem]]:
    """Validate schedule items `{action, after | at, key}`; return specs and problems."""
    found: list[Problem] = []
    specs: list[ScheduleSpec] = []
    for where, item in _items(raw, at, code, "schedule", found):
        before = len(found)
        if not _shape(item, where, SCHEDULE_KEYS, code, found):
            continue
        _action_ref(item, where, ctx, code, found, required=True)
        _text(item, "key", where, code, found)
        if ("after" in item) == ("at" in item):
            found.append(
                Problem(
                    code,
                    "a schedule item needs exactly one of 'after' "
                    "(seconds) or 'at' (RFC 3339 time or reference)",
                    where,
                )
            )
        elif "after" in item:
            after = item["after"]
            if isinstance(after, bool) or not isinstance(after, int | float) or after < 0:
                found.append(
                    Problem(
                        code,
                        "'after' must be a number of seconds >= 0",
                        pointer_join(where, "after"),
                    )
                )
        elif not _time_or_reference(item["at"]):
            found.append(
                Problem(
                    code,
                    "'at' must be an RFC 3339 time, '$timestamp', an 'input.<path>' reference "
                    'or a {"$ref": "<path>"} reference',
                    pointer_join(where, "at"),
                )
            )
        if len(found) == before:
            after = item.get("after")
            specs.append(
                ScheduleSpec(
                    action=item["action"],
                    after=float(after) if after is not None else None,
                    at=item.get("at"),
                    key=item.get("key"),
                )
            )
    return specs, found


def parse_unschedules(
    raw: Any, at: str, ctx: SpecContext, code: str
) -> tuple[list[UnscheduleSpec], list[Problem]]:
    """Validate unschedule items `{key}` or `{action}`; return specs and problems."""
    found: list[Problem] = []
    specs: list[UnscheduleSpec] = []
    for where, item in _items(raw, at, code, "unschedule", found):
        before = len(found)
        if not _shape(item, where, UNSCHEDULE_KEYS, code, found):
            continue
        if ("key" in item) == ("action" in item):
            found.append(
                Problem(code, "an unschedule item needs exactly one of 'key' or 'action'", where)
            )
        _text(item, "key", where, code, found)
        _action_ref(item, where, ctx, code, found, required=False)
        if len(found) == before:
            specs.append(UnscheduleSpec(key=item.get("key"), action=item.get("action")))
    return specs, found


def _action_ref(
    item: dict[str, Any],
    where: str,
    ctx: SpecContext,
    code: str,
    found: list[Problem],
    *,
    required: bool,
) -> None:
    if "action" not in item:
        if required:
            found.append(Problem(code, "'action' is required (an action of this workflow)", where))
        return
    action = item["action"]
    if not isinstance(action, str) or action not in ctx.action_keys:
        found.append(
            Problem(
                code,
                f"'action' {action!r} is not an action of this workflow",
                pointer_join(where, "action"),
            )
        )


def _time_or_reference(value: Any) -> bool:
    if parse_reference(value) is not None:
        return True
    if not isinstance(value, str):
        return False
    if value == "$timestamp" or (value.startswith("input.") and len(value) > len("input.")):
        return True
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return False
    return "T" in value.upper() and moment.tzinfo is not None
