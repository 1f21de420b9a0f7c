"""Which node keys may attest events at each point of the log (issue 12).

A node key signs server-attested events (`system`, visitors, bearer-token users). It is
trusted from the event after a `trust_node` of the system registry until a
`distrust_node`; both are an admin's own signed decision. Two exceptions, both fixed in
the log: the genesis (seq 1 of `system-registry`, the event that founds the deployment)
may be attested by any key, and the legacy keys of a deployment made before node trust
was governed (migration 0009, the export header's `legacy_nodes`) count as trusted from
the start until a `distrust_node`. `NodeTrust` follows a log in order; verifiers ask it
before each event and tell it about each system-registry event after.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stateward.domain.access import ADMIN_ROLE
from stateward.domain.paths import SYSTEM_NAMESPACE, registry_id
from stateward.domain.registry import NODE_ACTIONS

SYSTEM_REGISTRY = registry_id(SYSTEM_NAMESPACE)


def is_genesis(process: str, seq: int) -> bool:
    """The founding event of a deployment: the first event of the system registry."""
    return process == SYSTEM_REGISTRY and seq == 1


def node_change(process: str, name: str, input: Mapping[str, Any]) -> tuple[str, bool] | None:
    """(key, trusted) when the event is a `trust_node` / `distrust_node`, else None."""
    if process != SYSTEM_REGISTRY or name not in NODE_ACTIONS:
        return None
    key = input.get("key")
    return (key, name == "trust_node") if isinstance(key, str) else None


def admin_of(system_data: Mapping[str, Any] | None, actor: str) -> bool:
    """Does the system registry's data (before an event) make `actor` a system admin?"""
    members = (system_data or {}).get("members") or {}
    roles = members.get(actor) or ()
    return any(str(r).lower() == ADMIN_ROLE for r in roles)


@dataclass
class NodeTrust:
    """The trusted node keys as a log is read in order (see the module docstring)."""

    legacy: frozenset[str] = frozenset()
    trusted: set[str] = field(default_factory=set)
    distrusted: set[str] = field(default_factory=set)
    #: Every key trusted at some point (legacy or by an event): checkpoint signers.
    ever: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.ever |= self.legacy

    def current(self) -> frozenset[str]:
        """The keys that may attest the next event."""
        return frozenset(self.trusted | (self.legacy - self.distrusted))

    def signers_for(self, process: str, seq: int, signer: str) -> frozenset[str]:
        """The trusted signers for this event (the genesis vouches for its own signer)."""
        current = self.current()
        return current | {signer} if is_genesis(process, seq) else current

    def apply(self, key: str, trusted: bool) -> None:
        """A `trust_node` (trusted=True) or `distrust_node` event took effect."""
        if trusted:
            self.trusted.add(key)
            self.distrusted.discard(key)
            self.ever.add(key)
        else:
            self.trusted.discard(key)
            self.distrusted.add(key)
