"""The `states` map of a definition (DESIGN §2.1): validate each state, build `StateDef`s.

Every state is checked field by field (wrong type or enum value: INVALID_FIELD; unknown
key: INVALID_FIELD), its form template by `forms.parse_form`, its hook for shape and (when a
module lookup is given) existence, its `mode` for consistency and its branch rules by
`branching.parse_rules`. A best-effort `StateDef` is built even for a state with problems so
the graph checks can still run; the definition itself is only built when nothing is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stateward.domain import errors
from stateward.domain.branching import parse_rules
from stateward.domain.errors import Problem
from stateward.domain.forms import parse_form
from stateward.domain.model import AUDIENCES, MODES, RetrySpec, StateDef
from stateward.domain.mutations import pointer_join
from stateward.domain.paths import resolve_hook
from stateward.domain.references import parse_reference
from stateward.domain.stages import parse_stage_extensions
from stateward.domain.stagetypes import parse_stage_type, type_problems
from stateward.domain.tasks import TaskSpec, parse_task

STATE_KEYS = (
    "label",
    "terminal",
    "description",
    "audience",
    "form",
    "assign",
    "sla_seconds",
    "hook",
    "mode",
    "surface",
    "visible",
    "branch_rules",
    "sla_warning",
    "sla_warning_notify",
    "timeout",
    "await",
    "returns",
    "type",
    "auto_transition",
    "stage_config",
    "retries",
)
#: Bounds of `retries` (issue 15): at most 10 re-runs, at most 300 s apart, so a failing
#: hook holds a worker slot for a bounded time.
MAX_RETRIES = 10
MAX_BACKOFF_SECONDS = 300
_TEXT_FIELDS = ("label", "description", "surface")


@dataclass(frozen=True)
class StateContext:
    """What state validation needs: the namespace (for hooks) and an optional module lookup."""

    namespace: str
    #: Tells whether a hook module (`ns/path/module`) exists; None: do not check.
    modules: Callable[[str], bool] | None
    #: The workflow's action keys (for `timeout` and `await`); None: do not check.
    action_keys: tuple[str, ...] | None = None


def parse_states(
    raw: dict[str, Any], pointer: str, ctx: StateContext
) -> tuple[dict[str, StateDef], list[Problem]]:
    """Validate every entry of the `states` object; return StateDefs (map order) and problems."""
    keys = list(raw)
    states: dict[str, StateDef] = {}
    found: list[Problem] = []
    for ordinal, key in enumerate(keys):
        at = pointer_join(pointer, key)
        if not key:
            found.append(Problem(errors.INVALID_FIELD, "a state key must not be empty", at))
        states[key] = _parse_state(key, ordinal, raw[key], at, keys, ctx, found)
    return states, found


def _parse_state(
    key: str,
    ordinal: int,
    entry: Any,
    at: str,
    keys: list[str],
    ctx: StateContext,
    found: list[Problem],
) -> StateDef:
    if not isinstance(entry, dict):
        found.append(Problem(errors.INVALID_FIELD, f"state {key!r} must be an object", at))
        return StateDef(key=key, ordinal=ordinal)

    def invalid(field: str, message: str) -> None:
        found.append(Problem(errors.INVALID_FIELD, message, pointer_join(at, field)))

    for field in entry:
        if field not in STATE_KEYS:
            invalid(field, f"unknown state field {field!r} (allowed: {', '.join(STATE_KEYS)})")
    for field in _TEXT_FIELDS:
        if field in entry and (not isinstance(entry[field], str) or not entry[field].strip()):
            invalid(field, f"state {field!r} must be a non-empty string")
    text = {f: entry[f] for f in _TEXT_FIELDS if isinstance(entry.get(f), str) and entry[f]}
    team, user, task = _assign(entry, at, found)
    extra = parse_stage_extensions(entry, at, ctx.action_keys, found)
    terminal = entry.get("terminal", False)
    if not isinstance(terminal, bool):
        invalid("terminal", "'terminal' must be true or false")
        terminal = False
    audience = entry.get("audience", "team")
    if audience not in AUDIENCES:
        invalid("audience", f"'audience' must be one of {', '.join(AUDIENCES)}")
        audience = "team"
    mode = entry.get("mode")
    if mode is not None and mode not in MODES:
        invalid("mode", f"'mode' must be one of {', '.join(MODES)}")
        mode = None
    sla = entry.get("sla_seconds")
    if sla is not None and (isinstance(sla, bool) or not isinstance(sla, int | float) or sla <= 0):
        invalid("sla_seconds", "'sla_seconds' must be a number of seconds > 0")
        sla = None
    visible = entry.get("visible", [])
    if not isinstance(visible, list) or not all(isinstance(v, str) and v for v in visible):
        invalid("visible", "'visible' must be an array of data keys (non-empty strings)")
        visible = []
    form = None
    if "form" in entry:
        form, form_problems = parse_form(entry["form"], pointer_join(at, "form"))
        found.extend(form_problems)
    hook = _check_hook(entry.get("hook"), pointer_join(at, "hook"), ctx, found)
    staged = parse_stage_type(
        entry, at, audience, lambda raw, where: _check_hook(raw, where, ctx, found), found
    )
    rules: tuple[Any, ...] = ()
    if "branch_rules" in entry:
        rules, rule_problems = parse_rules(
            entry["branch_rules"], pointer_join(at, "branch_rules"), keys
        )
        found.extend(rule_problems)
    retries = _retries(entry, at, found)
    state = StateDef(
        key=key,
        ordinal=ordinal,
        retries=retries,
        label=text.get("label"),
        terminal=terminal,
        description=text.get("description"),
        audience=audience,
        form=form,
        assign=team,
        assign_user=user,
        task=task,
        sla_seconds=float(sla) if sla is not None else None,
        hook=hook,
        mode=mode,
        surface=text.get("surface"),
        visible=tuple(visible),
        branch_rules=rules,
        **extra,
        **staged,
    )
    found.extend(mode_problems(state, pointer_join(at, "mode")))
    found.extend(type_problems(state, at))
    if retries is not None and state.hook is None and state.on_advance is None:
        found.append(Problem(errors.INVALID_FIELD, "'retries' needs a state with a hook",
                             pointer_join(at, "retries")))  # fmt: skip
    return state


def _retries(entry: dict[str, Any], at: str, found: list[Problem]) -> RetrySpec | None:
    """`retries: {max, backoffSeconds?}`: `max` an integer 0..10, `backoffSeconds` a
    number 0..300 (default 0); any other key, type or value is INVALID_FIELD."""
    if "retries" not in entry:
        return None
    raw, where = entry["retries"], pointer_join(at, "retries")
    if not isinstance(raw, dict):
        found.append(Problem(errors.INVALID_FIELD, "'retries' must be an object "
                             "{max, backoffSeconds}", where))  # fmt: skip
        return None
    ok = True
    for field in raw:
        if field not in ("max", "backoffSeconds"):
            message = f"unknown retries field {field!r} (allowed: max, backoffSeconds)"
            found.append(Problem(errors.INVALID_FIELD, message, pointer_join(where, field)))
            ok = False
    count = raw.get("max")
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_RETRIES:
        found.append(Problem(errors.INVALID_FIELD, f"'max' must be an integer 0..{MAX_RETRIES}",
                             pointer_join(where, "max")))  # fmt: skip
        ok = False
    backoff = raw.get("backoffSeconds", 0)
    if (isinstance(backoff, bool) or not isinstance(backoff, int | float)
            or not 0 <= backoff <= MAX_BACKOFF_SECONDS):  # fmt: skip
        found.append(Problem(errors.INVALID_FIELD, "'backoffSeconds' must be a number of "
                             f"seconds 0..{MAX_BACKOFF_SECONDS}",
                             pointer_join(where, "backoffSeconds")))  # fmt: skip
        ok = False
    return RetrySpec(count, float(backoff)) if ok and isinstance(count, int) else None


def _assign(
    entry: dict[str, Any], at: str, found: list[Problem]
) -> tuple[str | None, Any, TaskSpec | None]:
    """`(team, user, task)` of `assign`: a team name, (DSL 2.1) `{"user": <id or {"$ref"}>}`,
    or a team's task `{"team", "candidates", "priority", "due", "followUp"}` (`domain.tasks`)."""
    if "assign" not in entry:
        return None, None, None
    raw, where = entry["assign"], pointer_join(at, "assign")
    if isinstance(raw, str) and raw.strip():
        return raw, None, None
    if isinstance(raw, dict) and set(raw) == {"user"}:
        user = raw["user"]
        if (isinstance(user, str) and user.strip()) or parse_reference(user) is not None:
            return None, user, None
    if isinstance(raw, dict) and "team" in raw:
        team, task, problems = parse_task(raw, where)
        found.extend(problems)
        return team, None, task
    found.append(
        Problem(
            errors.INVALID_FIELD,
            '\'assign\' must be a team name, {"team": ..., "candidates": [...], '
            '"priority": ..., "due": ..., "followUp": ...} or {"user": "<actor id>"} / '
            '{"user": {"$ref": "data.<path>"}}',
            where,
        )
    )
    return None, None, None


def _check_hook(hook: Any, at: str, ctx: StateContext, found: list[Problem]) -> str | None:
    if hook is None:
        return None
    if not isinstance(hook, str):
        found.append(Problem(errors.INVALID_FIELD, "'hook' must be a string 'module:function'", at))
        return None
    resolved = resolve_hook(hook, ctx.namespace)
    if resolved is None:
        found.append(
            Problem(
                errors.UNRESOLVED_HOOK,
                f"hook {hook!r} is not 'module:function' or 'ns/path/module:function'",
                at,
            )
        )
    elif ctx.modules is not None and not ctx.modules(resolved[0]):
        found.append(
            Problem(errors.UNRESOLVED_HOOK, f"hook module {resolved[0]!r} is not deployed", at)
        )
    return hook


def mode_problems(state: StateDef, at: str) -> list[Problem]:
    """INCONSISTENT_MODE problems of a state's `mode`.

    `form` needs a form template, `review` an `assign` team, `delegated` a `surface`,
    `automated` a `hook` and audience `system`.
    """
    needs = {
        "form": [(state.form is not None, "a 'form' template")],
        "review": [(state.assigned, "an 'assign' team or user")],
        "delegated": [(state.surface is not None, "a 'surface' package")],
        "automated": [
            (state.hook is not None, "a 'hook'"),
            (state.audience == "system", "audience 'system'"),
        ],
    }.get(state.mode or "", [])
    return [
        Problem(errors.INCONSISTENT_MODE, f"mode {state.mode!r} needs {what}", at)
        for ok, what in needs
        if not ok
    ]
