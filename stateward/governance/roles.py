"""Role resolution over registry namespaces (DESIGN §6) — pure functions.

The roles of an actor in namespace N are the union of its grants in the `system` registry
and in the registries of every prefix of N: for `a/b/c` that is `system`, `a`, `a/b` and
`a/b/c`. Roles are compared lower-case. Grants themselves are materialized from registry
events by the runtime; this module only reads them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

SYSTEM_NAMESPACE = "system"
REGISTRY_SUFFIX = "-registry"


@dataclass(frozen=True)
class Grant:
    """`actor` holds `role` in the registry of `registry_namespace`."""

    registry_namespace: str
    actor: str
    role: str


@functools.lru_cache(maxsize=4096)
def namespace_scopes(namespace: str) -> tuple[str, ...]:
    """`system` then every prefix of `namespace`: `a/b/c` -> (system, a, a/b, a/b/c).
    Cached: every live delivery checks the subscriber's roles in the event's namespace."""
    segments = [s for s in namespace.strip("/").split("/") if s]
    prefixes = ["/".join(segments[: i + 1]) for i in range(len(segments))]
    return (SYSTEM_NAMESPACE, *(p for p in prefixes if p != SYSTEM_NAMESPACE))


def roles_for(actor: str, namespace: str, grants: Iterable[Grant]) -> frozenset[str]:
    """The lower-case roles `actor` holds in `namespace` (union over `namespace_scopes`)."""
    scopes = frozenset(namespace_scopes(namespace))
    return frozenset(
        g.role.lower() for g in grants if g.actor == actor and g.registry_namespace in scopes
    )


def has_role(actor: str, namespace: str, role: str, grants: Iterable[Grant]) -> bool:
    """True when `actor` holds `role` (case-insensitive) in `namespace`."""
    return role.lower() in roles_for(actor, namespace, grants)


def registry_process_id(namespace: str) -> str:
    """The registry process id of a namespace: `customer/retail` -> `customer-retail-registry`."""
    return namespace.strip("/").replace("/", "-") + REGISTRY_SUFFIX
