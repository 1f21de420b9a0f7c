"""The `actions` map of a definition (DESIGN §2.1, §3, §4): validate each action, build
`ActionDef`s with compiled guards and merged spawn/schedule/unschedule specs.

Action keys starting with `$` are kernel operations (`$start`, `$cancel`, ...) and keys
holding `#` are reserved for actions generated from branch rules: both are FORBIDDEN_KEY.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import DomainError, Problem
from stateward.domain.expressions import compile_expression
from stateward.domain.messages import parse_message
from stateward.domain.model import ActionDef, Predicate
from stateward.domain.mutations import pointer_join, validate_mutation
from stateward.domain.routing import parse_target
from stateward.domain.specs import SpecContext, parse_schedules, parse_spawns, parse_unschedules

ACTION_KEYS = (
    "label",
    "role",
    "from",
    "to",
    "when",
    "then",
    "mutate",
    "spawn",
    "schedule",
    "unschedule",
    "message",
)
ItemParser = Callable[[Any, str, SpecContext, str], tuple[list[Any], list[Problem]]]
EFFECT_OPERATORS: dict[str, ItemParser] = {
    "$spawn": parse_spawns,
    "$schedule": parse_schedules,
    "$unschedule": parse_unschedules,
}
ROLE = re.compile(r"[a-z0-9][a-z0-9_.-]*")
ANY_ROLE = "*"


def parse_roles(raw: Any, at: str) -> tuple[tuple[str, ...], list[Problem]]:
    """Parse a comma-separated role list; return lower-cased roles (empty = anyone).

    `*` or absent means any verified actor; `*` mixed with names, empty entries and names
    outside `[a-z0-9][a-z0-9_.-]*` (case-insensitive) are INVALID_ROLE.
    """
    if raw is None:
        return (), []
    if not isinstance(raw, str):
        return (), [Problem(errors.INVALID_FIELD, "'role' must be a comma-separated string", at)]
    tokens = [t.strip().lower() for t in raw.split(",")]
    if tokens == [ANY_ROLE]:
        return (), []
    bad = [t for t in tokens if not ROLE.fullmatch(t)]
    if bad:
        shown = ", ".join(repr(t) for t in bad)
        return (), [
            Problem(
                errors.INVALID_ROLE,
                f"invalid role name(s) {shown} in {raw!r} "
                "(a comma list of names, or '*' alone for anyone)",
                at,
            )
        ]
    return tuple(dict.fromkeys(tokens)), []


def compile_guard(text: Any, at: str, found: list[Problem]) -> Predicate | None:
    """Compile a `when`/`then` expression; report INVALID_EXPRESSION (with position) or
    INVALID_FIELD (not a string) into `found`."""
    if not isinstance(text, str):
        found.append(Problem(errors.INVALID_FIELD, "expression must be a string", at))
        return None
    try:
        return compile_expression(text)
    except DomainError as exc:  # the message names the 0-based position
        found.append(Problem(errors.INVALID_EXPRESSION, exc.message, at))
        return None


@dataclass(frozen=True)
class ActionContext:
    """What action validation needs: the state keys and the spawn/schedule context."""

    #: None when `states` itself is missing or invalid: state references are not checked.
    state_keys: tuple[str, ...] | None
    specs: SpecContext


def parse_actions(
    raw: dict[str, Any], pointer: str, ctx: ActionContext
) -> tuple[dict[str, ActionDef], list[Problem]]:
    """Validate every entry of the `actions` object; return ActionDefs (map order), problems."""
    actions: dict[str, ActionDef] = {}
    found: list[Problem] = []
    for key, entry in raw.items():
        at = pointer_join(pointer, key)
        if not key or key.startswith("$") or "#" in key:
            found.append(
                Problem(
                    errors.FORBIDDEN_KEY,
                    f"action key {key!r} is reserved: keys "
                    "must be non-empty, not start with '$' (kernel operations) "
                    "and not hold '#' (generated branch actions)",
                    at,
                )
            )
        if not isinstance(entry, dict):
            found.append(Problem(errors.INVALID_FIELD, f"action {key!r} must be an object", at))
            continue
        actions[key] = _parse_action(key, entry, at, ctx, found)
    return actions, found


def _parse_action(
    key: str, entry: dict[str, Any], at: str, ctx: ActionContext, found: list[Problem]
) -> ActionDef:
    def ptr(*tokens: str) -> str:
        return pointer_join(at, *tokens)

    for field in entry:
        if field not in ACTION_KEYS:
            found.append(
                Problem(
                    errors.INVALID_FIELD,
                    f"unknown action field {field!r} (allowed: {', '.join(ACTION_KEYS)})",
                    ptr(field),
                )
            )
    label = entry.get("label")
    if label is not None and (not isinstance(label, str) or not label.strip()):
        found.append(
            Problem(errors.INVALID_FIELD, "'label' must be a non-empty string", ptr("label"))
        )
        label = None
    roles, role_problems = parse_roles(entry.get("role"), ptr("role"))
    found.extend(role_problems)
    from_states = _from(entry, ptr("from"), ctx.state_keys, found)
    to, routes = parse_target(entry.get("to"), ptr("to"), ctx.state_keys, compile_guard, found)
    when_fn = compile_guard(entry["when"], ptr("when"), found) if "when" in entry else None
    then_fn = compile_guard(entry["then"], ptr("then"), found) if "then" in entry else None
    mutate, effects = _mutate(entry, to or ("" if routes else None), ptr("mutate"), ctx, found)
    for name in ("spawn", "schedule", "unschedule"):
        if name in entry:
            items, problems = EFFECT_OPERATORS["$" + name](
                entry[name], ptr(name), ctx.specs, errors.INVALID_FIELD
            )
            effects["$" + name][:0] = items
            found.extend(problems)
    return ActionDef(
        key=key,
        label=label,
        roles=roles,
        from_states=from_states,
        to=to,
        when=entry.get("when") if when_fn else None,
        then=entry.get("then") if then_fn else None,
        mutate=mutate,
        spawn=tuple(effects["$spawn"]),
        schedule=tuple(effects["$schedule"]),
        unschedule=tuple(effects["$unschedule"]),
        when_fn=when_fn,
        then_fn=then_fn,
        routes=routes,
        message=parse_message(entry.get("message"), ptr("message"), found),
    )


def _from(
    entry: dict[str, Any], at: str, state_keys: tuple[str, ...] | None, found: list[Problem]
) -> tuple[str, ...] | None:
    if "from" not in entry:
        return None
    raw = entry["from"]
    keys = [raw] if isinstance(raw, str) else raw
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        found.append(
            Problem(
                errors.INVALID_FIELD,
                "'from' must be a state key or a non-empty array of state keys",
                at,
            )
        )
        return None
    for i, key in enumerate(keys):
        if state_keys is not None and key not in state_keys:
            where = at if isinstance(raw, str) else pointer_join(at, str(i))
            found.append(
                Problem(errors.UNKNOWN_STATE, f"'from' names unknown state {key!r}", where)
            )
    return tuple(dict.fromkeys(keys))


def _mutate(
    entry: dict[str, Any], to: str | None, at: str, ctx: ActionContext, found: list[Problem]
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    effects: dict[str, list[Any]] = {name: [] for name in EFFECT_OPERATORS}
    if "mutate" not in entry:
        return {}, effects
    raw = entry["mutate"]
    if not isinstance(raw, dict):
        found.append(
            Problem(
                errors.INVALID_MUTATION,
                "'mutate' must be an object of "
                "operators ($set $merge $append $increment $remove ...)",
                at,
            )
        )
        return {}, effects
    data_ops = {op: value for op, value in raw.items() if op not in EFFECT_OPERATORS}
    found.extend(validate_mutation(data_ops, at))
    for op, parse in EFFECT_OPERATORS.items():
        if op in raw:
            items, problems = parse(
                raw[op], pointer_join(at, op), ctx.specs, errors.INVALID_MUTATION
            )
            effects[op].extend(items)
            found.extend(problems)
    found.extend(_state_mismatch(data_ops, to, at))
    return data_ops, effects


def _state_mismatch(data_ops: dict[str, Any], to: str | None, at: str) -> list[Problem]:
    """`$set` of `state` must agree with `to`; other operators must leave `state` alone."""
    found: list[Problem] = []
    assigned = data_ops.get("$set")
    if isinstance(assigned, dict) and "state" in assigned:
        where = pointer_join(at, "$set", "state")
        if to is None:
            found.append(
                Problem(
                    errors.STATE_MUTATION_MISMATCH,
                    "'$set' of 'state' without 'to': the state only changes through 'to'",
                    where,
                )
            )
        elif to == "":
            found.append(
                Problem(
                    errors.STATE_MUTATION_MISMATCH,
                    "'$set' of 'state' with a list of routes: the route chosen sets the state",
                    where,
                )
            )
        elif assigned["state"] != to:
            found.append(
                Problem(
                    errors.STATE_MUTATION_MISMATCH,
                    f"'$set' of 'state' to {assigned['state']!r} disagrees with 'to' {to!r}",
                    where,
                )
            )
    for op in ("$append", "$increment", "$merge"):
        value = data_ops.get(op)
        if isinstance(value, dict) and "state" in value:
            found.append(
                Problem(
                    errors.STATE_MUTATION_MISMATCH,
                    f"'{op}' must not change 'state': the state only changes through 'to'",
                    pointer_join(at, op, "state"),
                )
            )
    removed = data_ops.get("$remove")
    if removed == "state" or (isinstance(removed, list) and "state" in removed):
        found.append(
            Problem(
                errors.STATE_MUTATION_MISMATCH,
                "'$remove' must not remove 'state'",
                pointer_join(at, "$remove"),
            )
        )
    return found
