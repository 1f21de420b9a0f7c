"""Who may operate instances (issue 15): migrate them, retry or resolve their incidents.

An operation on an instance of namespace N needs the role `admin` or `operator` in N (a
grant of N or of an enclosing namespace, as for every role). `operator` is the role a
namespace grants (`grantRole(namespace, actor, ["operator"])`) to let someone repair
instances without administering the namespace: it deploys nothing and grants nothing.
The system actor (sweeps, batches run by the server for an operator) always may.
"""

from __future__ import annotations

from stateward.domain.access import OPERATION_ROLES, has_role
from stateward.domain.errors import FORBIDDEN, DomainError
from stateward.domain.model import Actor


def may_operate(actor: Actor) -> bool:
    """True when `actor` (with its roles in the instance's namespace) may operate on it."""
    return actor.is_system or any(has_role(actor, role) for role in OPERATION_ROLES)


def require_operator(actor: Actor, what: str) -> None:
    """FORBIDDEN unless `actor` may operate (see the module docstring)."""
    if not may_operate(actor):
        raise DomainError(
            FORBIDDEN,
            f"{what} needs the role admin or operator in the instance's namespace",
            details={"roles": list(OPERATION_ROLES)},
        )
