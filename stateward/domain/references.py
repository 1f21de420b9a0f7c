"""Value references of DSL 2.1: `{"$ref": "<path>"}` in mutation, spawn and timer values.

DSL v2 had one reference form, a string that is exactly `input.<path>`; every other string
is a literal (DESIGN §4). DSL 2.1 adds an explicit object form that can read more roots:

- `data.<path>`   the process data before the event (the same data `when` sees);
- `input.<path>`  the action input (same as the string form);
- `actor.id`, `actor.roles`  the acting actor;
- `parent.<path>` in a spawned child: its parent's data as it was when the child was spawned.

A missing path resolves to null. `scan_values` finds malformed references (errors) and
string literals that were almost certainly meant as references (`"data.amount"`,
`"actor.id"`: warning LITERAL_LOOKS_LIKE_PATH), because those are stored as literal text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import Problem

__all__ = [
    "REF",
    "ROOTS",
    "RefScope",
    "parse_reference",
    "read_reference",
    "scan_values",
]

REF = "$ref"
ROOTS = ("data", "input", "actor", "parent")
#: The actor exposes exactly these two fields to references and expressions.
ACTOR_FIELDS = ("id", "roles")
_SEGMENT = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = re.compile(rf"{_SEGMENT}(\.{_SEGMENT})*")
#: A literal string that reads like a DSL 2.1 path (input.* already is a reference).
_LOOKS_LIKE_PATH = re.compile(rf"(data|parent)(\.{_SEGMENT})+|actor\.(id|roles)")


@dataclass(frozen=True)
class RefScope:
    """What references other than `input.*` read: data before the event, the actor as
    expressions see it (`{id, roles}`), and the parent's data snapshot (children only)."""

    data: Mapping[str, Any] = field(default_factory=dict)
    actor: Mapping[str, Any] = field(default_factory=dict)
    parent: Mapping[str, Any] | None = None


def parse_reference(value: object) -> tuple[str, tuple[str, ...]] | None:
    """`(root, segments)` of a well-formed `{"$ref": "<root>.<path>"}` object, else None."""
    if not isinstance(value, Mapping) or len(value) != 1 or REF not in value:
        return None
    return _split(value[REF])


def _split(path: object) -> tuple[str, tuple[str, ...]] | None:
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        return None
    root, *rest = path.split(".")
    if root not in ROOTS or not rest:
        return None
    if root == "actor" and (len(rest) != 1 or rest[0] not in ACTOR_FIELDS):
        return None
    return root, tuple(rest)


def is_reference_object(value: object) -> bool:
    """True for any object holding a `$ref` key (well-formed or not)."""
    return isinstance(value, Mapping) and REF in value


def read_reference(
    root: str, segments: tuple[str, ...], input: Mapping[str, Any], scope: RefScope | None
) -> Any:
    """The value a parsed reference points at (None when missing or out of scope)."""
    if root == "input":
        current: Any = input
    elif scope is None:
        return None
    elif root == "data":
        current = scope.data
    elif root == "actor":
        current = scope.actor
    else:
        current = scope.parent
    for key in segments:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def _join(base: str, token: object) -> str:
    return base + "/" + str(token).replace("~", "~0").replace("/", "~1")


def scan_values(value: Any, at: str, code: str) -> list[Problem]:
    """Problems of the references inside a value (recursively): malformed `{"$ref"}`
    objects (`code`) and literal strings that look like paths (warnings)."""
    found: list[Problem] = []
    stack: list[tuple[Any, str]] = [(value, at)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _LOOKS_LIKE_PATH.fullmatch(item):
                found.append(_literal_warning(item, where))
        elif is_reference_object(item):
            if parse_reference(item) is None:
                found.append(_bad_reference(item, where, code))
        elif isinstance(item, Mapping):
            stack.extend((v, _join(where, k)) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, _join(where, n)) for n, v in enumerate(item))
    return found


def _literal_warning(text: str, at: str) -> Problem:
    return Problem(
        errors.LITERAL_LOOKS_LIKE_PATH,
        f"the string {text!r} is stored as literal text; to read that value write "
        f'{{"$ref": "{text}"}}',
        at,
        severity="warning",
    )


def _bad_reference(item: Mapping[str, Any], at: str, code: str) -> Problem:
    if len(item) != 1:
        message = f"a reference object holds only {REF!r} (found {', '.join(map(repr, item))})"
    else:
        message = (
            f"{REF} {item[REF]!r} is not a reference: write data.<path>, input.<path>, "
            "actor.id, actor.roles or parent.<path>"
        )
    return Problem(code, message, at)
