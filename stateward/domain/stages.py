"""State fields added by DSL 2.1 besides `assign`: SLA tuning, `timeout` and `await`.

- `sla_warning`: the fraction of `sla_seconds` at which the warning fires (0 < f < 1,
  default 0.8); `sla_warning_notify: false` keeps the warning off the notifications.
- `timeout`: `{"seconds": N | {"$ref"}, "action"}`, a timer armed on entry and cancelled on
  exit (`timeouts.py`).
- `await`: `{"children": "all" | "any" | n >= 1, "then": "<action>"}`, a join on the
  children spawned in the state (`joins.py`).
- `returns`: on a terminal state of a child, the data keys handed to the parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import Problem
from stateward.domain.model import AwaitSpec
from stateward.domain.timeouts import parse_timeout

AWAIT_KEYS = ("children", "then")
AWAIT_ALL = "all"
AWAIT_ANY = "any"


def parse_stage_extensions(
    entry: dict[str, Any], at: str, action_keys: Sequence[str] | None, found: list[Problem]
) -> dict[str, Any]:
    """The StateDef keyword arguments of the DSL 2.1 state fields (problems into `found`)."""
    out: dict[str, Any] = {}

    def bad(field: str, message: str) -> None:
        found.append(Problem(errors.INVALID_FIELD, message, f"{at}/{field}"))

    if "sla_warning" in entry:
        fraction = entry["sla_warning"]
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, int | float)
            or not 0 < fraction < 1
        ):
            bad("sla_warning", "'sla_warning' must be a fraction of sla_seconds (0 < f < 1)")
        else:
            out["sla_warning"] = float(fraction)
    if "sla_warning_notify" in entry:
        notify = entry["sla_warning_notify"]
        if isinstance(notify, bool):
            out["sla_warning_notify"] = notify
        else:
            bad("sla_warning_notify", "'sla_warning_notify' must be true or false")
    if "timeout" in entry:
        spec = parse_timeout(entry["timeout"], f"{at}/timeout", action_keys, found)
        if spec is not None:
            out["timeout"] = spec
    if "returns" in entry:
        keys = entry["returns"]
        if isinstance(keys, list) and all(isinstance(k, str) and k for k in keys):
            out["returns"] = tuple(keys)
        else:
            bad("returns", "'returns' must be an array of data keys (non-empty strings)")
        if entry.get("terminal") is not True:
            bad("returns", "'returns' belongs on a terminal state (what a child hands back)")
    if "await" in entry:
        join = _parse_await(entry["await"], f"{at}/await", action_keys, found)
        if join is not None:
            out["await_"] = join
    return out


def _parse_await(
    raw: Any, at: str, action_keys: Sequence[str] | None, found: list[Problem]
) -> AwaitSpec | None:
    def bad(message: str, where: str = at) -> None:
        found.append(Problem(errors.INVALID_FIELD, message, where))

    if not isinstance(raw, dict):
        bad('\'await\' is an object {"children": "all" | "any" | n, "then": "<action>"}')
        return None
    for key in raw:
        if key not in AWAIT_KEYS:
            bad(f"unknown await field {key!r} (allowed: children, then)", f"{at}/{key}")
    children = raw.get("children", AWAIT_ALL)
    count = not isinstance(children, bool) and isinstance(children, int) and children >= 1
    if children not in (AWAIT_ALL, AWAIT_ANY) and not count:
        bad('\'children\' must be "all", "any" or a count >= 1', f"{at}/children")
        return None
    then = raw.get("then")
    if not isinstance(then, str) or (action_keys is not None and then not in action_keys):
        bad(f"await 'then' {then!r} is not an action of this workflow", f"{at}/then")
        return None
    return AwaitSpec(children=children, then=then)
