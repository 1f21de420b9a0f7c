"""The version hash of a workflow definition covers the order of `states` and `actions`
(DESIGN §2.3; issue 12).

RFC 8785 sorts object keys, but state and action order set ordinals and what `advance`
tries first. So a version's hash is sha256 of the RFC 8785 bytes of its *ordered view*:
the definition with `states` and `actions` each replaced by an array of `[key, value]`
pairs in authored order (everything else as is). Envelopes stay RFC 8785 (sorted), so an
`add_workflow` / `update_workflow` input carries the authored order beside the
definition: `{"definition": {...}, "order": {"states": [keys], "actions": [keys]}}`.

Hash schemes of stored versions: 1 = sha256 of RFC 8785 of the definition (versions
deployed before this, or by an event without `order`; their order is not covered);
2 = sha256 of RFC 8785 of the ordered view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stateward.domain.canonical import canonical_hash
from stateward.domain.errors import INVALID_INPUT, Problem

ORDERED_SECTIONS = ("states", "actions")
LEGACY_SCHEME = 1
ORDERED_SCHEME = 2


def definition_order(definition: Mapping[str, Any]) -> dict[str, list[str]]:
    """The authored order of the definition's `states` and `actions` keys."""
    return {
        section: list(value)
        for section in ORDERED_SECTIONS
        if isinstance(value := definition.get(section), Mapping)
    }


def ordered_view(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The definition with `states` / `actions` as `[[key, value], …]` in their order."""
    view = dict(definition)
    for section in ORDERED_SECTIONS:
        value = definition.get(section)
        if isinstance(value, Mapping):
            view[section] = [[key, item] for key, item in value.items()]
    return view


def ordered_hash(definition: Mapping[str, Any]) -> str:
    """Scheme 2: sha256 hex of the RFC 8785 bytes of the ordered view."""
    return canonical_hash(ordered_view(definition))


def version_hash(definition: Mapping[str, Any], scheme: int) -> str:
    """The hash of `definition` (in its own key order) under `scheme`."""
    return ordered_hash(definition) if scheme == ORDERED_SCHEME else canonical_hash(definition)


def order_problems(definition: Any, order: Any) -> list[Problem]:
    """Problems (INVALID_INPUT, pointers under `/order`) unless `order` lists exactly the
    keys of the definition's `states` and `actions` objects, each once."""
    if not isinstance(order, Mapping):
        return [Problem(INVALID_INPUT, "`order` must be an object of key lists", "/order")]
    found: list[Problem] = []
    sections = definition_order(definition) if isinstance(definition, Mapping) else {}
    for extra in sorted(set(order) - set(sections)):
        found.append(Problem(INVALID_INPUT, f"`order` has no `{extra}` to give", f"/order/{extra}"))
    for section, keys in sections.items():
        given = order.get(section)
        if (
            not isinstance(given, list)
            or not all(isinstance(k, str) for k in given)
            or len(given) != len(keys)
            or set(given) != set(keys)
        ):
            found.append(Problem(
                INVALID_INPUT,
                f"`order.{section}` must list every key of `{section}` once",
                f"/order/{section}",
            ))  # fmt: skip
    return found


def apply_order(definition: Mapping[str, Any], order: Mapping[str, Any] | None) -> dict[str, Any]:
    """The definition with `states` / `actions` rebuilt in `order` (a valid order, see
    `order_problems`); `order=None` keeps the definition's own order."""
    out = dict(definition)
    if order is None:
        return out
    for section in ORDERED_SECTIONS:
        value = definition.get(section)
        keys = order.get(section)
        if isinstance(value, Mapping) and isinstance(keys, list):
            out[section] = {key: value[key] for key in keys}
    return out


def deployed_hash(input: Mapping[str, Any]) -> tuple[str, int]:
    """(hash, scheme) of the version an `add_workflow` / `update_workflow` input makes."""
    definition = input["definition"]
    order = input.get("order")
    if order is None:
        return canonical_hash(definition), LEGACY_SCHEME
    return ordered_hash(apply_order(definition, order)), ORDERED_SCHEME
