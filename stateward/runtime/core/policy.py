"""The one read rule of the API (issue 10), and the one answer for what it hides.

A caller reads an object of namespace N — an instance, its events and assignments, a
notification about it, a workflow, a module, a registry, a bus event — when it holds a
role in N or in a namespace above N (grants in `system` cover every namespace). Visitors
read only through the visitor view of their entry token (`runtime.public`); they never
hold a `Viewer`. Acting needs the same read (`domain.access.may_read`, enforced by
`act` for every event on an instance).

Whatever a caller may not read is answered exactly like an id that does not exist:
`not_found(kind)` — NOT_FOUND with a fixed message that names no path, state or role.
Every resolver, mutation result, `node(id)`, subscription delivery and export goes
through the functions below, so the rule lives in this one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from stateward.domain.access import ADMIN_ROLE, may_read
from stateward.domain.errors import NOT_FOUND, DomainError
from stateward.domain.model import Actor
from stateward.persistence import UnitOfWork
from stateward.records import INSTANCE, NotificationRecord, ProcessRecord

TEAM_PREFIX = "team:"


class Viewer(Protocol):
    """What the rule needs of a caller (`runtime.access.auth.Viewer` is one)."""

    @property
    def actor(self) -> str: ...

    def roles_in(self, namespace: str) -> frozenset[str]: ...


def not_found(kind: str) -> DomainError:
    """The answer for a `kind` ("instance", "assignment", ...) that is missing OR hidden."""
    return DomainError(NOT_FOUND, f"{kind} does not exist or is not visible to you")


def can_read(viewer: Viewer | None, namespace: str | None) -> bool:
    """The read rule: `viewer` holds a role in `namespace` or above (anonymous: never)."""
    return viewer is not None and namespace is not None and bool(viewer.roles_in(namespace))


V = TypeVar("V", bound=Viewer)


def require_namespace(viewer: V | None, namespace: str | None, kind: str) -> V:
    """`viewer` when it may read `namespace`; else `not_found(kind)`."""
    if viewer is None or not can_read(viewer, namespace):
        raise not_found(kind)
    return viewer


def readable_process(
    viewer: Viewer | None, record: ProcessRecord | None, kind: str | None = INSTANCE
) -> ProcessRecord:
    """`record` when it exists, is of `kind` (any when None) and `viewer` may read it;
    else `not_found` (the same answer for all three)."""
    name = kind or "process"
    if record is None or (kind is not None and record.kind != kind):
        raise not_found(name)
    require_namespace(viewer, record.namespace, name)
    return record


def visible_process(viewer: Viewer | None, record: ProcessRecord | None) -> bool:
    """True when `record` exists and `viewer` may read it (listings skip the rest)."""
    return record is not None and can_read(viewer, record.namespace)


def can_read_payload(viewer: Viewer | None, payload: Mapping[str, Any]) -> bool:
    """May `viewer` receive this bus event (§9 payload)? By its namespace."""
    namespace = payload.get("namespace")
    return isinstance(namespace, str) and can_read(viewer, namespace)


def watches_team(viewer: Viewer | None, team: str, namespace: str | None) -> bool:
    """May `viewer` see team `team`'s queue in `namespace`? Holders of the team role or
    of `admin` there (or above) — the rule of `assignments(team)` and `assignmentQueue`."""
    if viewer is None or namespace is None:
        return False
    roles = viewer.roles_in(namespace)
    return team.lower() in roles or ADMIN_ROLE in roles


def can_read_notification(viewer: Viewer | None, record: NotificationRecord | None) -> bool:
    """A notification is the viewer's when addressed to it, or to a team whose role it
    holds in the notification's namespace (or above) — and always only when it may read
    that namespace."""
    if viewer is None or record is None or not can_read(viewer, record.namespace):
        return False
    if record.recipient == viewer.actor:
        return True
    team = record.recipient.removeprefix(TEAM_PREFIX)
    return record.recipient.startswith(TEAM_PREFIX) and team in viewer.roles_in(record.namespace)


async def actor_may_read(uow: UnitOfWork, actor: str, record: ProcessRecord) -> bool:
    """The read rule for an actor id (services called with one, not with a `Viewer`):
    its roles in the record's namespace, as `act` will judge the event it is about to
    submit (`domain.access.may_read`)."""
    roles = frozenset(await uow.grants.roles_of(actor, record.namespace))
    subject = Actor(id=actor, roles=roles)
    return may_read(subject, entry_token_hash=record.entry_token_hash, started_by=record.started_by)
