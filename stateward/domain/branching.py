"""Branch rules (DESIGN §2.1): validation, target resolution and desugaring into actions.

A state's `branch_rules` are `[{"field", "op", "value", "target"}]`, tried in order by
`advance`. The loader turns them into guarded actions `<state>#1`, `<state>#2`, ... from
that state (no role restriction, `generated=True`), then an ordinal + 1 fallback action
when no rule has field `*` and the state is not terminal. The guards are closures built
here directly, not expression text.

Rule semantics (read against process data; a field `input.x` reads the action input):
a field is a data key, or a dotted path into nested objects. A missing (or null) field
makes every rule false except `not_exists`. `eq`/`neq`/`in` compare loosely: numbers
numerically, a string against a number or boolean by its JSON text. `gt`/`lt`/`gte`/`lte`
compare numerically (numeric strings count as numbers). `contains` is a substring test on
strings and a membership test on arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import Problem
from stateward.domain.jsonvalues import json_equal
from stateward.domain.model import ActionDef, BranchRule, Predicate
from stateward.domain.mutations import pointer_join

OPS = ("eq", "neq", "gt", "lt", "gte", "lte", "in", "contains", "exists", "not_exists")
VALUELESS_OPS = ("exists", "not_exists")
NUMERIC_OPS = ("gt", "lt", "gte", "lte")
ALWAYS = "*"
RULE_KEYS = ("field", "op", "value", "target", "target_stage")
#: The seed's name of `target` (§16), accepted as an alias.
TARGET_ALIAS = "target_stage"
_MISSING = object()
#: Hook phases (`ActionDef.hook_phase`): the `on_advance` hook, a dynamic state's routing
#: hook; an automated state's hook runs on entry (`ENTRY`).
ENTRY = "entry"
ON_ADVANCE = "on_advance"
ROUTE = "route"


def resolve_target(target: Any, state_keys: Sequence[str]) -> str | None:
    """The state key a rule target names, or None.

    A string names a state exactly, else case-insensitively, else (all digits) by ordinal;
    an integer is a 0-based ordinal.
    """
    if isinstance(target, bool):
        return None
    if isinstance(target, int):
        return state_keys[target] if 0 <= target < len(state_keys) else None
    if not isinstance(target, str):
        return None
    if target in state_keys:
        return target
    folded = target.casefold()
    for key in state_keys:
        if key.casefold() == folded:
            return key
    return resolve_target(int(target), state_keys) if target.isdigit() else None


def parse_rules(
    raw: Any, pointer: str, state_keys: Sequence[str]
) -> tuple[tuple[BranchRule, ...], list[Problem]]:
    """Validate a state's `branch_rules` list; return the rules (targets resolved) and problems.

    Shape problems are INVALID_BRANCH_RULE; a target that names no state is UNKNOWN_STATE.
    """
    if not isinstance(raw, list):
        return (), [Problem(errors.INVALID_BRANCH_RULE, "branch_rules must be an array", pointer)]
    rules: list[BranchRule] = []
    found: list[Problem] = []
    for index, item in enumerate(raw):
        at = pointer_join(pointer, str(index))
        rule = _parse_rule(item, at, state_keys, found)
        if rule is not None:
            rules.append(rule)
    return tuple(rules), found


def _parse_rule(
    item: Any, at: str, state_keys: Sequence[str], found: list[Problem]
) -> BranchRule | None:
    def bad(message: str, where: str = at) -> None:
        found.append(Problem(errors.INVALID_BRANCH_RULE, message, where))

    if not isinstance(item, dict):
        bad("a branch rule must be an object {field, op, value, target}")
        return None
    before = len(found)
    for key in item:
        if key not in RULE_KEYS:
            bad(f"unknown branch rule key {key!r}", pointer_join(at, key))
    field, op, value = item.get("field"), item.get("op"), item.get("value", _MISSING)
    if not isinstance(field, str) or not field:
        bad("branch rule 'field' must be a non-empty string", pointer_join(at, "field"))
    always = field == ALWAYS
    if op is None and not always:
        bad(f"branch rule 'op' is required (one of {', '.join(OPS)})", pointer_join(at, "op"))
    elif op is not None and op not in OPS:
        bad(f"unknown branch rule op {op!r} (one of {', '.join(OPS)})", pointer_join(at, "op"))
    elif not always and isinstance(op, str):
        _check_value(op, value, pointer_join(at, "value"), bad)
    name = TARGET_ALIAS if TARGET_ALIAS in item and "target" not in item else "target"
    target = resolve_target(item.get(name), state_keys)
    if "target" in item and TARGET_ALIAS in item:
        bad(
            "branch rule has both 'target' and its alias 'target_stage': keep one",
            pointer_join(at, TARGET_ALIAS),
        )
    elif name not in item:
        bad("branch rule 'target' (or 'target_stage') is required (a state key or ordinal)")
    elif target is None:
        found.append(
            Problem(
                errors.UNKNOWN_STATE,
                f"branch rule target {item[name]!r} names no state (key or 0-based ordinal)",
                pointer_join(at, name),
            )
        )
    if len(found) > before or target is None:
        return None
    return BranchRule(
        field=str(field), op=str(op or "exists"), value=item.get("value"), target=target
    )


def _check_value(op: str, value: Any, where: str, bad: Callable[[str, str], None]) -> None:
    if op in VALUELESS_OPS:
        return
    if value is _MISSING:
        bad(f"branch rule op {op!r} needs a 'value'", where)
    elif op in NUMERIC_OPS and _number(value) is None:
        bad(f"branch rule op {op!r} compares numbers; value {value!r} is not one", where)
    elif op == "in" and not isinstance(value, list):
        bad("branch rule op 'in' needs an array value", where)


def rule_predicate(rule: BranchRule) -> Predicate:
    """The guard of one rule: (data, input, actor) -> bool, per the module's semantics."""
    if rule.field == ALWAYS:
        return lambda data, input_, actor: True
    test = _TESTS[rule.op]
    field, expected = rule.field, rule.value

    def guard(data: Mapping[str, Any], input_: Mapping[str, Any], actor: Mapping[str, Any]) -> bool:
        actual = _read(field, data, input_)
        if actual is _MISSING or actual is None:
            return rule.op == "not_exists"
        return test(actual, expected)

    return guard


def desugar(
    state: str,
    rules: Sequence[BranchRule],
    next_state: str | None,
    terminal: bool,
    *,
    routed: bool = False,
    complete: bool = False,
    dynamic: bool = False,
    on_advance: bool = False,
) -> list[ActionDef]:
    """The generated actions of one state's rules: `<state>#1`.. then the fallback, if any.

    Nothing is generated for a terminal state (it accepts no action), nor for a state
    without rules unless it is `routed` (`auto_transition`: the ordinal + 1 fallback is
    its way out). The fallback goes to `next_state` (ordinal + 1) when no rule has field
    `*` and such a state exists; past the last state (`complete`: no declared action
    leaves it) the fallback completes the instance.
    """
    if terminal or not (rules or routed or complete or dynamic or on_advance):
        return []
    actions = [
        ActionDef(
            key=f"{state}#{n}",
            label=f"branch: {r.field} {r.op} {r.value!r}" if r.field != ALWAYS else "branch: *",
            from_states=(state,),
            to=r.target,
            generated=True,
            when_fn=None if r.field == ALWAYS else rule_predicate(r),
        )
        for n, r in enumerate(rules, start=1)
    ]
    if on_advance:  # seed §8 step 5: the on_advance hook runs before any routing
        actions.insert(0, _hand_over(state, "advance", ON_ADVANCE))
    if all(r.field != ALWAYS for r in rules):
        key = f"{state}#{len(rules) + 1}"
        if dynamic:  # no rule held: the state's hook routes (seed §8 step 6)
            actions.append(_hand_over(state, "hook", ROUTE))
        elif next_state is not None:
            actions.append(
                ActionDef(
                    key=key,
                    label="branch: otherwise (next state)",
                    from_states=(state,),
                    to=next_state,
                    generated=True,
                )
            )
        elif complete:
            actions.append(
                ActionDef(
                    key=key,
                    label="branch: otherwise (past the last state: complete)",
                    from_states=(state,),
                    generated=True,
                    completes=True,
                )
            )
    return actions


def _hand_over(state: str, suffix: str, phase: str) -> ActionDef:
    """The generated action that hands the routing of `state` to a hook (`phase`)."""
    what = "on_advance hook" if phase == ON_ADVANCE else "routing hook"
    return ActionDef(
        key=f"{state}#{suffix}",
        label=f"branch: {what}",
        from_states=(state,),
        generated=True,
        hook_phase=phase,
    )


def _read(field: str, data: Mapping[str, Any], input_: Mapping[str, Any]) -> Any:
    source: Any = data
    if field.startswith("input."):
        source, field = input_, field[len("input.") :]
    if isinstance(source, Mapping) and field in source:
        return source[field]
    for part in field.split("."):
        if not isinstance(source, Mapping) or part not in source:
            return _MISSING
        source = source[part]
    return source


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def loose_equal(a: Any, b: Any) -> bool:
    """Branch-rule equality: equal JSON values; numbers numerically, also against numeric
    strings (`"10" eq 10`); booleans against `"true"`/`"false"`; never a boolean against a
    number."""
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        if isinstance(a, str) or isinstance(b, str):
            return _text(a) == _text(b)
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float | str) and isinstance(b, int | float | str):
        x, y = _number(a), _number(b)
        return x is not None and x == y
    return json_equal(a, b)


def _compare(op: str) -> Callable[[Any, Any], bool]:
    def test(actual: Any, expected: Any) -> bool:
        a, b = _number(actual), _number(expected)
        if a is None or b is None:
            return False
        return {"gt": a > b, "lt": a < b, "gte": a >= b, "lte": a <= b}[op]

    return test


def _contains(actual: Any, expected: Any) -> bool:
    if isinstance(actual, str):
        return isinstance(expected, str) and expected in actual
    if isinstance(actual, list):
        return any(loose_equal(item, expected) for item in actual)
    return False


_TESTS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": loose_equal,
    "neq": lambda a, b: not loose_equal(a, b),
    "gt": _compare("gt"),
    "lt": _compare("lt"),
    "gte": _compare("gte"),
    "lte": _compare("lte"),
    "in": lambda a, b: isinstance(b, list) and any(loose_equal(a, item) for item in b),
    "contains": _contains,
    "exists": lambda a, b: True,
    "not_exists": lambda a, b: False,
}
