"""Stage types (seed §3a, §4, §8): `type`, `auto_transition` and `stage_config`.

- `type`: `simple` (branch rules, then ordinal + 1), `dynamic` (branch rules first; when
  none holds the state's `hook` routes the submission: `$action` names an action, `$next`
  a state key or ordinal, the rest of its result is merged), `automated` (a `system`
  state whose hook runs on entry, then the rules / ordinal + 1 route). Default:
  `automated` for a `system` state with a hook, else `simple`.
- `auto_transition: true`: on entry the state is left at once by its branch rules /
  ordinal + 1, with no hook and no human (in the same event).
- `stage_config`: `{"on_advance": "module:function", "auto_assign": "round_robin"}`.

Validation (INCONSISTENT_MODE unless said otherwise): `automated` and `dynamic` need a
`hook`; a hook on a type that does not run one (`simple`) is an error, as is a
non-terminal `system` state that nothing can ever leave (no hook, no `auto_transition`, no
`timeout`/`await`, no declared action out of it — `graph_problems`, after the actions are
known); `automated` needs audience `system`; `dynamic` is for states where someone submits
(not `system`); `auto_transition` does not go with a hook type, a `form` or an `assign`;
`auto_assign` needs a team `assign`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import Problem
from stateward.domain.model import (
    AUTO_ASSIGN,
    AUTOMATED,
    DYNAMIC,
    SIMPLE,
    STAGE_TYPES,
    ActionDef,
    StateDef,
)
from stateward.domain.mutations import pointer_join

STAGE_CONFIG_KEYS = ("on_advance", "auto_assign")
CheckHook = Callable[[Any, str], str | None]


def parse_stage_type(
    entry: Mapping[str, Any], at: str, audience: str, check_hook: CheckHook, found: list[Problem]
) -> dict[str, Any]:
    """The StateDef keyword arguments of `type`, `auto_transition` and `stage_config`."""
    out: dict[str, Any] = {}
    raw_type = entry.get("type")
    if raw_type is not None and raw_type not in STAGE_TYPES:
        found.append(
            Problem(
                errors.INVALID_FIELD,
                f"'type' must be one of {', '.join(STAGE_TYPES)}",
                pointer_join(at, "type"),
            )
        )
        raw_type = None
    has_hook = entry.get("hook") is not None
    if raw_type is None:
        raw_type = AUTOMATED if audience == "system" and has_hook else SIMPLE
    out["stage_type"] = raw_type
    auto = entry.get("auto_transition", False)
    if not isinstance(auto, bool):
        found.append(
            Problem(
                errors.INVALID_FIELD,
                "'auto_transition' must be true or false",
                pointer_join(at, "auto_transition"),
            )
        )
        auto = False
    out["auto_transition"] = auto
    if "stage_config" in entry:
        out.update(
            _stage_config(
                entry["stage_config"], pointer_join(at, "stage_config"), check_hook, found
            )
        )
    return out


def _stage_config(raw: Any, at: str, check_hook: CheckHook, found: list[Problem]) -> dict[str, Any]:
    def bad(message: str, where: str = at) -> None:
        found.append(Problem(errors.INVALID_FIELD, message, where))

    if not isinstance(raw, dict):
        bad(
            '\'stage_config\' is an object {"on_advance": "module:function", '
            '"auto_assign": "round_robin"}'
        )
        return {}
    out: dict[str, Any] = {}
    for key in raw:
        if key not in STAGE_CONFIG_KEYS:
            bad(
                f"unknown stage_config field {key!r} (allowed: {', '.join(STAGE_CONFIG_KEYS)})",
                pointer_join(at, key),
            )
    if "on_advance" in raw:
        hook = raw["on_advance"]
        if isinstance(hook, dict) and set(hook) == {"package_id", "entry_point"}:
            # The seed's `{package_id, entry_point}` spelling of `module:function`.
            hook = f"{hook['package_id']}:{hook['entry_point']}"
        out["on_advance"] = check_hook(hook, pointer_join(at, "on_advance"))
    if "auto_assign" in raw:
        mode = raw["auto_assign"]
        if mode not in AUTO_ASSIGN:
            bad(
                f"'auto_assign' must be one of {', '.join(AUTO_ASSIGN)}",
                pointer_join(at, "auto_assign"),
            )
        else:
            out["auto_assign"] = mode
    return out


def type_problems(state: StateDef, at: str) -> list[Problem]:
    """INCONSISTENT_MODE problems of a state's stage type (see the module docstring)."""
    found: list[Problem] = []

    def bad(message: str, field: str) -> None:
        found.append(Problem(errors.INCONSISTENT_MODE, message, pointer_join(at, field)))

    kind = state.stage_type
    if kind in (AUTOMATED, DYNAMIC) and state.hook is None:
        bad(
            f"a {kind} state needs a 'hook' ({'routing' if kind == DYNAMIC else 'run on entry'})",
            "type",
        )
    if kind == SIMPLE and state.hook is not None:
        bad(
            'a hook on a simple state is never run: set "type": "dynamic" (the hook routes '
            'the submission) or, on a system state, "automated"; or remove it',
            "hook",
        )
    if kind == AUTOMATED and state.audience != "system":
        bad(
            "an automated state runs its hook on entry with nobody acting: it needs "
            "audience 'system'",
            "type",
        )
    if kind == DYNAMIC and state.audience == "system":
        bad(
            "a dynamic state routes what someone submits; a system state is 'automated' "
            "(hook on entry) or has 'auto_transition'",
            "type",
        )
    if state.auto_transition:
        if kind != SIMPLE:
            bad(
                f"'auto_transition' leaves the state by its rules; a {kind} state's hook does that",
                "auto_transition",
            )
        if state.form is not None or state.assigned:
            bad(
                "'auto_transition' leaves the state at once: a 'form' or 'assign' there is "
                "never used",
                "auto_transition",
            )
    if state.auto_assign is not None and state.assign is None:
        bad(
            "'auto_assign' gives the assignment to a member of the 'assign' team: set one",
            "stage_config",
        )
    if state.on_advance is not None and state.on_advance == state.hook:
        bad("'on_advance' must differ from the state's routing 'hook'", "stage_config")
    return found


def graph_problems(
    states: Mapping[str, StateDef], declared: Mapping[str, ActionDef]
) -> list[Problem]:
    """A non-terminal `system` state nothing can ever leave: no hook, no `auto_transition`,
    no `timeout`, no `await`, and no declared action out of it (the system actor performs
    those: timers, joins, a hook's `$action`). An instance entering it would hang."""
    leaves: set[str] = set()
    for action in declared.values():
        if action.moves and action.from_states is not None:
            leaves.update(action.from_states)
    return [
        Problem(
            errors.INCONSISTENT_MODE,
            f"system state {key!r} has no 'hook', no 'auto_transition' and nothing that "
            "leaves it: nobody may act there, an instance entering it would wait for ever",
            pointer_join("/states", key, "audience"),
        )
        for key, state in states.items()
        if state.audience == "system"
        and not state.terminal
        and state.hook is None
        and not state.auto_transition
        and state.timeout is None
        and state.await_ is None
        and key not in leaves
    ]
