"""Parse, validate and canonicalize Workflow DSL v2 definitions (DESIGN §2).

`validate_definition` reports every problem at once (errors block import, deployment and
execution; warnings never block), each with an RFC 6901 pointer, and builds the typed,
immutable `model.Definition` when there is no error: states in map order with 0-based
ordinals, actions with compiled guards, branch rules desugared into generated actions, and
the RFC 8785 canonical bytes and the version hash (sha256 of the order-keeping view,
`versionhash.py`). `load_definition` is the raising form.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from stateward.domain import errors
from stateward.domain.actions import ActionContext, parse_actions
from stateward.domain.branching import desugar
from stateward.domain.canonical import canonical_bytes
from stateward.domain.errors import InvalidDefinition, Problem
from stateward.domain.lint import LintContext, lint
from stateward.domain.messages import check_messages, parse_correlation
from stateward.domain.model import DYNAMIC, ActionDef, Definition, Route, StateDef
from stateward.domain.mutations import pointer_join
from stateward.domain.paths import (
    SYSTEM_NAMESPACE,
    is_canonical_path,
    path_problems,
    registry_id,
    split_path,
)
from stateward.domain.rawjson import parse_json_text, unrepresentable
from stateward.domain.specs import SpecContext
from stateward.domain.stagetypes import graph_problems
from stateward.domain.starting import parse_start, start_message
from stateward.domain.states import StateContext, parse_states
from stateward.domain.timeouts import parse_timeout
from stateward.domain.versionhash import ordered_hash

__all__ = [
    "ValidationReport",
    "is_canonical_path",
    "load_definition",
    "registry_id",
    "split_path",
    "validate_definition",
]

VERSION = "2.0"
METADATA = ("$version", "$path", "$description")
#: Known non-`$` top-level fields; `branding` (an object) is shown to public visitors.
FIELDS = (
    "initial", "states", "actions", "branding", "start", "idle_timeout", "correlation",
)  # fmt: skip

Deployed = Collection[str] | Callable[[str], bool] | None


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of validating one definition: every error and warning, and when there is
    no error the built `Definition`."""

    valid: bool
    errors: tuple[Problem, ...]
    warnings: tuple[Problem, ...]
    definition: Definition | None = None

    def as_dict(self) -> dict[str, Any]:
        """The wire form `{valid, errors: [{code, message, pointer}], warnings: [...]}`."""
        return {
            "valid": self.valid,
            "errors": [p.as_dict() for p in self.errors],
            "warnings": [p.as_dict() for p in self.warnings],
        }


def validate_definition(
    source: str | Mapping[str, Any],
    *,
    deployed: Deployed = None,
    target: str | None = None,
    modules: Callable[[str], bool] | None = None,
    bootstrap: bool = False,
    spawned_into: Collection[str] = (),
) -> ValidationReport:
    """Validate a definition given as raw JSON text or as a mapping; report every problem.

    `deployed`: workflow paths that exist (a collection or a predicate), for spawn targets;
    None checks only their shape. `target`: the deployment target path, which must equal
    `$path`. `modules`: tells whether a hook module path (`ns/path/module`, the workflow's own
    namespace filled in for a bare `module`) exists; None checks only the hook's shape.
    `bootstrap`: the built-in governance workflow, which may omit `$path` and use
    `*/bootstrap`. `spawned_into`: states that other workflows' spawns start this one in
    (`lint.spawn_entries`), which are then reachable (no UNREACHABLE_STATE).
    """
    found: list[Problem] = []
    value: Any = source
    if isinstance(source, str):
        value, found = parse_json_text(source)
        if value is None:
            return _report(found, None)
    if not isinstance(value, Mapping):
        found.append(
            Problem(errors.NOT_AN_OBJECT, "a workflow definition must be a JSON object", "")
        )
        return _report(found, None)
    raw = copy.deepcopy(dict(value))
    found.extend(unrepresentable(raw))
    path = _check_header(raw, target, bootstrap, found)
    namespace = split_path(path)[0] if path else SYSTEM_NAMESPACE
    states = _section(raw, "states", found)
    initial = _check_initial(raw, states, found)
    state_defs: dict[str, StateDef] = {}
    actions = _section(raw, "actions", found)
    action_keys = tuple(actions) if actions is not None else None
    if states is not None:
        state_ctx = StateContext(namespace, modules, action_keys)
        state_defs, problems = parse_states(states, "/states", state_ctx)
        found.extend(problems)
    declared: dict[str, ActionDef] = {}
    start_roles, spawn_only = parse_start(raw.get("start"), found)
    started_by = start_message(raw.get("start"), found)
    correlation = parse_correlation(raw.get("correlation"), found)
    idle = None
    if "idle_timeout" in raw:
        idle = parse_timeout(raw["idle_timeout"], "/idle_timeout", action_keys, found)
    if actions is not None:
        keys = tuple(state_defs) if states is not None else None
        spec_ctx = SpecContext(keys, tuple(actions), path, _lookup(deployed))
        declared, problems = parse_actions(actions, "/actions", ActionContext(keys, spec_ctx))
        found.extend(problems)
        check_messages(declared, correlation, started_by, found)
    generated = _generated(state_defs, declared, completing=not bootstrap)
    found.extend(graph_problems(state_defs, declared))
    # The implicit fallback of a state nothing declared leaves is not an authored edge:
    # the graph warnings (DEAD_END_STATE, UNREACHABLE_STATE) do not count it.
    authored = [a for a in generated if _authored(a, state_defs)]
    authored.extend(_hook_edges(state_defs))
    lint_ctx = LintContext(path, spawn_only, idle, frozenset(spawned_into))
    warnings = lint(initial, state_defs, declared, authored, lint_ctx)
    definition = None
    if initial is not None and not any(p.severity == "error" for p in found):
        canonical = canonical_bytes(raw)
        definition = Definition(
            path=path,
            description=raw.get("$description"),
            initial=initial,
            states=MappingProxyType(state_defs),
            actions=MappingProxyType({**{a.key: a for a in generated}, **declared}),
            source=raw,
            canonical=canonical,
            hash=ordered_hash(raw),
            start_roles=start_roles,
            spawn_only=spawn_only,
            idle_timeout=idle,
            correlation=MappingProxyType(correlation),
            start_message=started_by,
        )
    return _report(found + warnings, definition)


def load_definition(
    source: str | Mapping[str, Any],
    *,
    deployed: Deployed = None,
    target: str | None = None,
    modules: Callable[[str], bool] | None = None,
    bootstrap: bool = False,
) -> Definition:
    """Validate and build a definition; raise `InvalidDefinition` (all errors) when invalid."""
    report = validate_definition(
        source, deployed=deployed, target=target, modules=modules, bootstrap=bootstrap
    )
    if report.definition is None:
        raise InvalidDefinition(report.errors)
    return report.definition


def _report(problems: list[Problem], definition: Definition | None) -> ValidationReport:
    errs = tuple(p for p in problems if p.severity == "error")
    warns = tuple(p for p in problems if p.severity == "warning")
    return ValidationReport(not errs, errs, warns, definition if not errs else None)


def _lookup(deployed: Deployed) -> Callable[[str], bool] | None:
    if deployed is None or callable(deployed):
        return deployed
    known = frozenset(deployed)
    return known.__contains__


def _check_header(
    raw: dict[str, Any], target: str | None, bootstrap: bool, found: list[Problem]
) -> str | None:
    """Check metadata and unknown top-level keys; return `$path` when it is a string."""
    for key in raw:
        at = pointer_join("", key)
        if key.startswith("$") and key not in METADATA:
            found.append(
                Problem(
                    errors.FORBIDDEN_KEY,
                    f"metadata key {key!r} is not allowed "
                    f"(only {', '.join(METADATA)}; no $category)",
                    at,
                )
            )
        elif not key.startswith("$") and key not in FIELDS:
            found.append(
                Problem(
                    errors.INVALID_FIELD,
                    f"unknown field {key!r} (allowed: {', '.join(METADATA + FIELDS)})",
                    at,
                )
            )
    version = raw.get("$version")
    if version != VERSION or not isinstance(version, str):
        what = "missing" if "$version" not in raw else f"{version!r} is not supported"
        found.append(
            Problem(
                errors.UNSUPPORTED_VERSION,
                f"$version {what}: it must be the string {VERSION!r}",
                "/$version",
            )
        )
    if "$description" in raw and not isinstance(raw["$description"], str):
        found.append(
            Problem(errors.INVALID_FIELD, "$description must be a string", "/$description")
        )
    if "branding" in raw and not isinstance(raw["branding"], dict):
        found.append(Problem(errors.INVALID_FIELD, "'branding' must be an object", "/branding"))
    path = raw.get("$path")
    if "$path" not in raw:
        if not bootstrap:
            found.append(
                Problem(
                    errors.MISSING_PATH,
                    "$path is required: it is the workflow's "
                    "identity, e.g. 'customer/retail/retail-customer'",
                    "/$path",
                )
            )
        return None
    if not isinstance(path, str):
        found.append(Problem(errors.INVALID_PATH, "$path must be a string", "/$path"))
        return None
    found.extend(
        p for p in path_problems(path) if not (bootstrap and p.code == errors.RESERVED_PATH)
    )
    if target is not None and target != path:
        found.append(
            Problem(
                errors.TARGET_MISMATCH,
                f"deployment target {target!r} differs from $path {path!r}",
                "/$path",
            )
        )
    return path


def _section(raw: dict[str, Any], name: str, found: list[Problem]) -> dict[str, Any] | None:
    if name not in raw:
        found.append(Problem(errors.MISSING_FIELD, f"{name!r} is required", f"/{name}"))
        return None
    value = raw[name]
    if not isinstance(value, dict):
        found.append(
            Problem(errors.INVALID_FIELD, f"{name!r} must be an object keyed by name", f"/{name}")
        )
        return None
    return value


def _check_initial(
    raw: dict[str, Any], states: dict[str, Any] | None, found: list[Problem]
) -> str | None:
    if "initial" not in raw:
        found.append(
            Problem(errors.MISSING_FIELD, "'initial' (a state key) is required", "/initial")
        )
        return None
    initial = raw["initial"]
    if not isinstance(initial, str):
        found.append(Problem(errors.INVALID_FIELD, "'initial' must be a state key", "/initial"))
        return None
    if states is not None and initial not in states:
        found.append(
            Problem(errors.UNKNOWN_STATE, f"'initial' names unknown state {initial!r}", "/initial")
        )
    return initial


def _authored(action: ActionDef, states: dict[str, StateDef]) -> bool:
    """True for a generated action that stems from what the state says (its rules or
    `auto_transition`), not from the implicit ordinal + 1 fallback."""
    source = states.get((action.from_states or ("",))[0])
    return source is not None and bool(
        source.branch_rules or source.auto_transition or source.on_advance
    )


def _hook_edges(states: dict[str, StateDef]) -> list[ActionDef]:
    """For the graph warnings: a dynamic state's hook may route to any other state."""
    return [
        ActionDef(
            key=f"{key}#hook",
            from_states=(key,),
            routes=tuple(Route(to=other) for other in states if other != key),
            generated=True,
        )
        for key, state in states.items()
        if state.stage_type == DYNAMIC and not state.terminal and len(states) > 1
    ]


def _generated(
    states: dict[str, StateDef], declared: dict[str, ActionDef], *, completing: bool = True
) -> list[ActionDef]:
    """The actions desugared from every state's branch rules, in state order.

    The last state, when not terminal and no declared action leaves it, gets a completing
    fallback: advancing past the last state completes the instance (seed §8 step 7).
    """
    keys = list(states)
    leaves = {s for a in declared.values() if a.moves for s in (a.from_states or states)}
    generated: list[ActionDef] = []
    for index, (key, state) in enumerate(states.items()):
        following = keys[index + 1] if index + 1 < len(keys) else None
        # A state no declared action leaves is routed by ordinal + 1 (seed §16: linear
        # workflows advance 0 -> 1 -> 2 by the fallback), as is an auto_transition state.
        routed = completing and (
            state.auto_transition or key not in leaves or state.on_advance is not None
        )
        generated.extend(
            desugar(
                key,
                state.branch_rules,
                following,
                state.terminal,
                routed=routed,
                complete=routed and following is None,
                dynamic=state.stage_type == DYNAMIC,
                on_advance=state.on_advance is not None,
            )
        )
    return generated
