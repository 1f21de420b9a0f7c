"""The hard-coded registry governance workflow (DESIGN §6), one per namespace.

Every namespace's registry process runs `<namespace>/bootstrap`: a single `active` state
and the governance actions (role `admin`), whose events carry
`action.workflow = "<namespace>/bootstrap"`. The system registry also has `rotate_key`
(any key, for itself: its grants move to the new key) and `revoke_key` (admin). What each
action records in the registry data, and the shape its input must have, live in
`registry.py`; the engine applies both for any bootstrap definition.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from stateward.domain.definition import load_definition
from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.model import Definition
from stateward.domain.paths import SYSTEM_NAMESPACE, is_namespace
from stateward.domain.registry import (
    GOVERNANCE_ACTIONS,
    KEY_ACTIONS,
    NODE_ACTIONS,
    validate_governance_input,
)

ACTIVE_STATE = "active"
_LABELS = {
    "add_workflow": "Add workflow",
    "update_workflow": "Update workflow",
    "remove_workflow": "Remove workflow",
    "add_module": "Add module",
    "update_module": "Update module",
    "grant_role": "Grant role",
    "revoke_role": "Revoke role",
    "set_webhook": "Set webhook",
    "allow_spawn": "Allow another namespace to spawn here",
    "disallow_spawn": "Withdraw a spawn allowance",
    "share_module": "Share a module with another namespace",
    "unshare_module": "Withdraw a module share",
    "rotate_key": "Rotate key",
    "revoke_key": "Revoke key",
    "trust_node": "Trust a node key",
    "distrust_node": "Withdraw trust in a node key",
}


def bootstrap_path(namespace: str) -> str:
    """`<namespace>/bootstrap`: the `action.workflow` of a registry's events."""
    return f"{namespace}/bootstrap"


def bootstrap_source(namespace: str) -> dict[str, Any]:
    """The DSL v2 JSON of a namespace's governance workflow (what `system/bootstrap` shows)."""
    actions: dict[str, Any] = {
        name: {"label": _LABELS[name], "role": "admin", "from": ACTIVE_STATE}
        for name in GOVERNANCE_ACTIONS
    }
    if namespace == SYSTEM_NAMESPACE:
        actions["rotate_key"] = {"label": _LABELS["rotate_key"], "role": "*", "from": ACTIVE_STATE}
        actions["revoke_key"] = {
            "label": _LABELS["revoke_key"],
            "role": "admin",
            "from": ACTIVE_STATE,
        }
        for name in NODE_ACTIONS:
            actions[name] = {"label": _LABELS[name], "role": "admin", "from": ACTIVE_STATE}
    return {
        "$version": "2.0",
        "$path": bootstrap_path(namespace),
        "$description": f"Registry governance of namespace {namespace}",
        "initial": ACTIVE_STATE,
        "states": {ACTIVE_STATE: {"label": "Active"}},
        "actions": actions,
    }


@lru_cache(maxsize=1024)
def bootstrap_definition(namespace: str) -> Definition:
    """The governance workflow of `namespace` (cached: definitions are immutable).

    Raises DomainError(INVALID_INPUT) for a malformed namespace.
    """
    if not is_namespace(namespace):
        raise DomainError(INVALID_INPUT, f"not a namespace: {namespace!r}")
    return load_definition(bootstrap_source(namespace), bootstrap=True)


def governance_actions(namespace: str) -> tuple[str, ...]:
    """The action names of a namespace's registry (key actions only for `system`)."""
    if namespace == SYSTEM_NAMESPACE:
        return (*GOVERNANCE_ACTIONS, *KEY_ACTIONS, *NODE_ACTIONS)
    return GOVERNANCE_ACTIONS


__all__ = [
    "ACTIVE_STATE",
    "bootstrap_definition",
    "bootstrap_path",
    "bootstrap_source",
    "governance_actions",
    "validate_governance_input",
]
