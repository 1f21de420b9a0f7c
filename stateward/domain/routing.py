"""One action, several targets (DSL 2.1): `to` as a list of `{"when": expr, "to": state}`.

An exclusive gateway on a named action: the routes are tried in order against the data
*after* the action's `mutate` (so a decision just recorded can route), the input and the
actor; the first whose `when` holds wins, a route without `when` always holds (put it
last, as the default). No route holding is GUARD_FAILED and nothing is written. A target
may be `$cancel` (end the instance as `cancelled`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import GUARD_FAILED, DomainError, Problem
from stateward.domain.model import CANCEL_TARGET, ActionDef, Predicate, Route

ROUTE_KEYS = ("when", "to")
Compile = Callable[[Any, str, list[Problem]], Predicate | None]


def parse_target(
    raw: Any,
    at: str,
    state_keys: Sequence[str] | None,
    compile_guard: Compile,
    found: list[Problem],
) -> tuple[str | None, tuple[Route, ...]]:
    """`(to, routes)` of an action's `to`: a state key, `$cancel`, or a list of routes."""
    if raw is None:
        return None, ()
    if isinstance(raw, str):
        # An unknown target is an error already; keep it, so the graph warnings still see
        # the action leave its state (no extra DEAD_END_STATE on top of UNKNOWN_STATE).
        _known(raw, at, state_keys, found)
        return raw, ()
    if not isinstance(raw, list) or not raw:
        found.append(
            Problem(
                errors.INVALID_FIELD,
                "'to' must be a state key, \"$cancel\" or a non-empty array of "
                '{"when": "<expression>", "to": "<state>"}',
                at,
            )
        )
        return None, ()
    routes: list[Route] = []
    for n, item in enumerate(raw):
        where = f"{at}/{n}"
        if not isinstance(item, dict) or not isinstance(item.get("to"), str):
            found.append(
                Problem(
                    errors.INVALID_FIELD, 'a route is {"when": "<expr>", "to": "<state>"}', where
                )
            )
            continue
        found.extend(
            Problem(errors.INVALID_FIELD, f"unknown route field {k!r} (allowed: when, to)", where)
            for k in item
            if k not in ROUTE_KEYS
        )
        if not _known(item["to"], f"{where}/to", state_keys, found):
            continue
        when_fn = compile_guard(item["when"], f"{where}/when", found) if "when" in item else None
        if "when" in item and when_fn is None:
            continue
        routes.append(Route(to=item["to"], when=item.get("when"), when_fn=when_fn))
        if "when" not in item and n != len(raw) - 1:
            found.append(
                Problem(
                    errors.INVALID_FIELD,
                    "a route without 'when' always holds: only the last route may omit it",
                    where,
                )
            )
    return None, tuple(routes)


def _known(to: str, at: str, state_keys: Sequence[str] | None, found: list[Problem]) -> bool:
    if to == CANCEL_TARGET or state_keys is None or to in state_keys:
        return True
    found.append(Problem(errors.UNKNOWN_STATE, f"'to' names unknown state {to!r}", at))
    return False


def choose_route(
    act: ActionDef, data: Mapping[str, Any], input: Mapping[str, Any], actor: Mapping[str, Any]
) -> str:
    """The target of the first route that holds; GUARD_FAILED when none does."""
    for route in act.routes:
        if route.when_fn is None or route.when_fn(data, input, actor):
            return route.to
    tried = "; ".join(f"{r.when} -> {r.to}" for r in act.routes)
    raise DomainError(
        GUARD_FAILED,
        f"no route of {act.key!r} holds (tried in order: {tried}); add a last route "
        "without 'when' as the default",
    )
