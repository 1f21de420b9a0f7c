"""Who may act (DESIGN §5 step 3): audiences, role lists and claimed assignments.

Split in two so `advance` can tell "you may not act here at all" (FORBIDDEN) from "this
action is not yours, try the next one" (skipped):
- `check_state_access`: rules of the current state (audience, claimed assignment);
- `holds_role`: the action's role list against the actor.
The `system` actor is the engine itself: it passes every rule (timers fire role-restricted
actions, hooks drive `system` states). A delegate (`delegate:<task id>`, the worker of a
delegated stage holding its callback token) acts only in a `delegated` state and then
takes any of its actions: the stage is handed to it; that the task is open, of this
instance and of this very stay in the state is checked by the write path.

`may_read` is the read rule every write also needs (issue 10: "writes need reads"): an
actor reads an object of namespace N when it holds any role there (its `roles` are the
roles it holds in N: grants of `system` and of every prefix of N); a visitor reads only
the instance of its entry token; the system reads everything.
"""

from __future__ import annotations

from collections.abc import Iterable

from stateward.domain.errors import FORBIDDEN, NOT_FOUND, DomainError
from stateward.domain.model import (
    SYSTEM_ACTOR,
    VISITOR_PREFIX,
    ActionDef,
    Actor,
    Definition,
    StateDef,
)

ANY_ROLE = "*"
PUBLIC_ROLE = "public"
ADMIN_ROLE = "admin"
#: The role a namespace grants to let someone operate its instances (migrate, publish
#: messages, bulk operations) without administering it (issue 15).
OPERATOR_ROLE = "operator"
OPERATION_ROLES = (ADMIN_ROLE, OPERATOR_ROLE)
#: How many hex digits of an entry token's sha256 name its visitor (`visitor:<16 hex>`).
VISITOR_DIGITS = 16


def visitor_of(entry_token_hash: str) -> str:
    """The visitor actor of an entry token, from the token's stored sha256 hex."""
    return f"{VISITOR_PREFIX}{entry_token_hash[:VISITOR_DIGITS]}"


def may_read(
    actor: Actor, *, entry_token_hash: str | None = None, started_by: str | None = None
) -> bool:
    """The read rule: may `actor` (with its roles in the object's namespace) read it?

    The system always; a visitor only the instance its entry token opens (or that it has
    just started, before its token is recorded); any other actor when it holds a role in
    the namespace or above. Acting on an instance needs this too (writes need reads).
    """
    if actor.id == SYSTEM_ACTOR or actor.is_delegate:
        # a delegate's task (checked in the write path) names the one instance it reads
        return True
    if actor.is_visitor:
        if entry_token_hash is not None and actor.id == visitor_of(entry_token_hash):
            return True
        return started_by is not None and actor.id == started_by
    return bool(actor.roles)


def check_state_access(state: StateDef, actor: Actor, claimed_by: str | None) -> None:
    """Raise FORBIDDEN unless `actor` may act at all while the process is in `state`.

    Only the system acts in `system` states; visitors act only in `public` states; when the
    state's assignment is claimed, only its assignee or an `admin` acts.
    """
    if actor.id == SYSTEM_ACTOR:
        return
    if actor.is_delegate:
        if state.mode != "delegated":
            raise DomainError(
                FORBIDDEN, f"state {state.key!r} is not delegated: its delegate may not act"
            )
        return
    audience = state.audience
    if audience == "system":
        raise DomainError(
            FORBIDDEN,
            f"state {state.key!r} is a system state: only the system actor acts in it",
        )
    if actor.is_visitor:
        if audience != "public":
            raise DomainError(
                FORBIDDEN, f"visitors may not act in state {state.key!r} (audience {audience})"
            )
        return
    if claimed_by is not None and claimed_by != actor.id and not has_role(actor, ADMIN_ROLE):
        raise DomainError(
            FORBIDDEN,
            f"the assignment of state {state.key!r} is claimed by another actor",
            details={"claimedBy": claimed_by},
        )


def holds_role(action: ActionDef, actor: Actor) -> bool:
    """True when `actor` matches the action's role list (case-insensitive, `*`/empty = any).

    A visitor only matches an action open to anyone or listing `public`; a delegate
    (already confined to its delegated state) matches every action of the state.
    """
    roles = action.roles
    if actor.id == SYSTEM_ACTOR or actor.is_delegate:
        return True
    if actor.is_visitor:
        return not roles or ANY_ROLE in roles or PUBLIC_ROLE in roles
    if not roles or ANY_ROLE in roles:
        return True
    held = actor.roles
    if not held.isdisjoint(roles):
        return True
    wanted = {r.lower() for r in roles}
    return any(r.lower() in wanted for r in held)


def check_role(action: ActionDef, actor: Actor) -> None:
    """Raise FORBIDDEN when `actor` does not hold one of the action's roles."""
    if not holds_role(action, actor):
        wanted = ",".join(action.roles) or ANY_ROLE
        raise DomainError(
            FORBIDDEN,
            f"action {action.key!r} needs one of the roles {wanted!r}",
            details={"roles": list(action.roles)},
        )


def has_role(actor: Actor, role: str) -> bool:
    """True when the actor holds `role` (case-insensitive)."""
    if role in actor.roles:
        return True
    return any(r.lower() == role for r in actor.roles)


def public_entry(definition: Definition) -> bool:
    """Public-entry eligible (seed §3a `entry_mode`, §15): any state is `public`. Entry
    tokens are issued only for instances of such workflows; `startPublic` further needs the
    initial state to be public."""
    return any(state.audience == "public" for state in definition.states.values())


def public_start(definition: Definition) -> bool:
    """Visitors may start it (`startPublic`): the initial state is `public`."""
    return definition.states[definition.initial].audience == "public"


def holds_operation_role(roles: Iterable[str]) -> bool:
    """True when the granted `roles` (any case) include `admin` or `operator`."""
    return any(role.lower() in OPERATION_ROLES for role in roles)


def require_operation_role(roles: Iterable[str], what: str) -> None:
    """The operator rule for a namespace where the caller holds `roles`: NOT_FOUND when it
    holds none there (nothing about the namespace leaks), FORBIDDEN without `admin` or
    `operator`; `what` names the operation in the message."""
    held = list(roles)
    if not held:
        raise DomainError(NOT_FOUND, "namespace does not exist or is not visible to you")
    if not holds_operation_role(held):
        raise DomainError(
            FORBIDDEN,
            f"{what} needs the role admin or operator",
            details={"roles": list(OPERATION_ROLES)},
        )
