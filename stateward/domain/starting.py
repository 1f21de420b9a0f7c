"""Who may start a workflow (DSL 2.1): `start: {"roles": "<comma list>", "spawn_only": bool}`.

Without `start` anyone who may act in the namespace starts any workflow (DSL v2). With
`roles`, only holders of one of them or `admin` (the `system` actor always; visitors when
the list names `public`); with `spawn_only`, only the system, i.e. a parent's spawn — a
payment workflow meant to be spawned by approvals cannot be started directly, not even by
an admin.
"""

from __future__ import annotations

from typing import Any

from stateward.domain import errors
from stateward.domain.access import ADMIN_ROLE, ANY_ROLE, PUBLIC_ROLE, has_role
from stateward.domain.errors import FORBIDDEN, DomainError, Problem
from stateward.domain.model import Actor, Definition

START_KEYS = ("roles", "spawn_only", "message")


def parse_start(raw: Any, found: list[Problem]) -> tuple[tuple[str, ...], bool]:
    """`(roles, spawn_only)` of the workflow's `start` field (problems into `found`);
    `start.message` is read by `start_message`."""
    from stateward.domain.actions import parse_roles  # the one role-list parser

    if raw is None:
        return (), False
    if not isinstance(raw, dict):
        found.append(
            Problem(
                errors.INVALID_FIELD,
                '\'start\' must be an object {"roles": "<comma list>", "spawn_only": bool}',
                "/start",
            )
        )
        return (), False
    for key in raw:
        if key not in START_KEYS:
            found.append(
                Problem(
                    errors.INVALID_FIELD,
                    f"unknown start field {key!r} (allowed: roles, spawn_only, message)",
                    f"/start/{key}",
                )
            )
    roles, problems = parse_roles(raw.get("roles"), "/start/roles")
    found.extend(problems)
    spawn_only = raw.get("spawn_only", False)
    if not isinstance(spawn_only, bool):
        found.append(
            Problem(errors.INVALID_FIELD, "'spawn_only' must be true or false", "/start/spawn_only")
        )
        spawn_only = False
    return roles, spawn_only


def check_start(definition: Definition, actor: Actor) -> None:
    """FORBIDDEN when `actor` may not start `definition` (the system always may)."""
    if actor.is_system:
        return
    if definition.spawn_only:
        raise DomainError(
            FORBIDDEN,
            f"workflow {definition.path} is started only by a spawn from another workflow "
            "(start.spawn_only)",
        )
    roles = definition.start_roles
    if not roles or ANY_ROLE in roles:
        return
    if actor.is_visitor:
        allowed = PUBLIC_ROLE in roles
    else:
        allowed = has_role(actor, ADMIN_ROLE) or any(r.lower() in roles for r in actor.roles)
    if not allowed:
        raise DomainError(
            FORBIDDEN,
            f"starting {definition.path} needs one of the roles {','.join(roles)!r}",
            details={"roles": list(roles)},
        )


def start_message(raw: Any, found: list[Problem]) -> str | None:
    """`start.message` (issue 15): the message whose publication starts an instance."""
    from stateward.domain.messages import parse_message

    if not isinstance(raw, dict):
        return None
    return parse_message(raw.get("message"), "/start/message", found)
