"""Typed domain errors and validation problems, each with a stable code.

Expected failures are data: a `DomainError` carries a `code` that clients match on,
a human message and, where it applies, an RFC 6901 pointer and a list of problems.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One validation finding: a stable code, a message and where (RFC 6901 pointer)."""

    code: str
    message: str
    pointer: str = ""
    severity: Severity = "error"

    def as_dict(self) -> dict[str, str]:
        """The wire form `{code, message, pointer}` used by the CLI and the API."""
        return {"code": self.code, "message": self.message, "pointer": self.pointer}


class DomainError(Exception):
    """A rule of the domain said no. Nothing was changed when this is raised."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        pointer: str = "",
        problems: Sequence[Problem] = (),
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.pointer = pointer
        self.problems = tuple(problems)
        self.details = dict(details or {})

    def __repr__(self) -> str:
        return f"DomainError({self.code!r}, {self.message!r})"


class InvalidDefinition(DomainError):
    """A workflow definition (or package) has at least one validation error."""

    def __init__(self, problems: Sequence[Problem], message: str | None = None) -> None:
        errors = [p for p in problems if p.severity == "error"]
        first = errors[0] if errors else None
        text = message or (
            f"{len(errors)} validation error(s); first: {first.code} at "
            f"{first.pointer or '/'}: {first.message}"
            if first
            else "invalid definition"
        )
        super().__init__("INVALID_DEFINITION", text, problems=problems)


# Validation error codes (DESIGN §2.2)
NOT_AN_OBJECT = "NOT_AN_OBJECT"
INVALID_JSON = "INVALID_JSON"
UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"
MISSING_FIELD = "MISSING_FIELD"
MISSING_PATH = "MISSING_PATH"
INVALID_PATH = "INVALID_PATH"
VERSION_SUFFIX = "VERSION_SUFFIX"
FORBIDDEN_KEY = "FORBIDDEN_KEY"
DUPLICATE_KEY = "DUPLICATE_KEY"
UNKNOWN_STATE = "UNKNOWN_STATE"
INVALID_EXPRESSION = "INVALID_EXPRESSION"
INVALID_MUTATION = "INVALID_MUTATION"
STATE_MUTATION_MISMATCH = "STATE_MUTATION_MISMATCH"
INVALID_FORM = "INVALID_FORM"
INVALID_ROLE = "INVALID_ROLE"
UNRESOLVED_SPAWN = "UNRESOLVED_SPAWN"
UNRESOLVED_HOOK = "UNRESOLVED_HOOK"
INCONSISTENT_MODE = "INCONSISTENT_MODE"
INVALID_BRANCH_RULE = "INVALID_BRANCH_RULE"
INVALID_FIELD = "INVALID_FIELD"
DUPLICATE_PATH = "DUPLICATE_PATH"
TARGET_MISMATCH = "TARGET_MISMATCH"
RESERVED_PATH = "RESERVED_PATH"
AMBIGUOUS_NAMESPACE = "AMBIGUOUS_NAMESPACE"

# Warning codes
UNREACHABLE_STATE = "UNREACHABLE_STATE"
DEAD_END_STATE = "DEAD_END_STATE"
TERMINAL_HAS_ACTIONS = "TERMINAL_HAS_ACTIONS"
SHADOWED_ACTION = "SHADOWED_ACTION"
MISSING_LABEL = "MISSING_LABEL"
LITERAL_LOOKS_LIKE_PATH = "LITERAL_LOOKS_LIKE_PATH"

# Runtime action errors
NOT_FOUND = "NOT_FOUND"
FORBIDDEN = "FORBIDDEN"
WRONG_STATE = "WRONG_STATE"
TERMINAL_STATE = "TERMINAL_STATE"
INACTIVE_PROCESS = "INACTIVE_PROCESS"
INVALID_INPUT = "INVALID_INPUT"
GUARD_FAILED = "GUARD_FAILED"
POSTCONDITION_FAILED = "POSTCONDITION_FAILED"
NO_APPLICABLE_ACTION = "NO_APPLICABLE_ACTION"

# API / governance errors (DESIGN §10)
UNAUTHENTICATED = "UNAUTHENTICATED"
INVALID_DEFINITION = "INVALID_DEFINITION"
ALREADY_CLAIMED = "ALREADY_CLAIMED"
CONFLICT = "CONFLICT"
BAD_SIGNATURE = "BAD_SIGNATURE"
REPLAYED = "REPLAYED"
RATE_LIMITED = "RATE_LIMITED"
#: A delegated task's callback token no longer opens it: the instance left the stage.
DELEGATION_CLOSED = "DELEGATION_CLOSED"
#: A delegated task's callback token expired (its TTL, or the lock it came with lapsed).
DELEGATION_EXPIRED = "DELEGATION_EXPIRED"
#: The database stayed unreachable through every retry: nothing was applied twice; retry
#: (with the same idempotencyKey) later.
UNAVAILABLE = "UNAVAILABLE"
