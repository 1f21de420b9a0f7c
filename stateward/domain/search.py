"""Searches over instances and assignments as plain values (issue 16).

The GraphQL inputs (`InstanceFilter`, `AssignmentFilter`, their `orderBy`) become these
frozen dataclasses; persistence turns them into one SQL statement (filters, keyset order,
count). Everything a caller may get wrong is checked here, with a stable code and a
pointer: a data path's syntax, an operator's value, an ordering's path.

Data conditions (`data: [{path, op, value}]`) address instance data by a dotted path of
keys (`customer.tier`); the ops compare the JSON value found there:

- `EQ`, `NE` against a scalar (string, number, boolean, null); `NE` also matches rows
  where the path is missing. `IN` against a non-empty list of scalars.
- `GT GTE LT LTE` against a number or a string; only values of the same JSON type match
  (a string never compares with a number), on both databases alike.
- `CONTAINS`: the array (or object) at the path contains `value` (JSON containment: an
  element for a scalar, every element for a list, every key for an object).
- `EXISTS`: `value` true (the default) matches rows that have the path, false those that
  don't.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stateward.domain.errors import INVALID_INPUT, DomainError

OPS = ("EQ", "NE", "GT", "GTE", "LT", "LTE", "IN", "CONTAINS", "EXISTS")
RANGE_OPS = ("GT", "GTE", "LT", "LTE")
#: One key of a data path: a letter or underscore, then letters, digits, `_` or `-`.
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
MAX_DEPTH = 8
MAX_CONDITIONS = 16
MAX_IN = 100

#: Instance orderings: `DATA` needs a path. The id breaks ties, so orders are total.
INSTANCE_ORDERS = ("CREATED", "UPDATED", "STATE_ENTERED", "SLA_DUE", "DATA")
ASSIGNMENT_ORDERS = ("CREATED", "DUE", "PRIORITY")
DIRECTIONS = ("ASC", "DESC")


def _bad(message: str, pointer: str) -> DomainError:
    return DomainError(INVALID_INPUT, message, pointer=pointer)


def parse_path(text: str, pointer: str) -> tuple[str, ...]:
    """The keys of a dotted data path (`a.b.c`), or INVALID_INPUT at `pointer`."""
    keys = tuple(text.split(".")) if isinstance(text, str) else ()
    if not keys or len(keys) > MAX_DEPTH or not all(_KEY.fullmatch(k) for k in keys):
        raise _bad(
            f"a data path is 1 to {MAX_DEPTH} dot-separated keys (letters, digits, _ and -, "
            "not starting with a digit)",
            pointer,
        )
    return keys


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int, float))


@dataclass(frozen=True)
class DataCondition:
    """`data.<path> <op> <value>` on an instance's current data."""

    path: tuple[str, ...]
    op: str
    value: Any = None

    @classmethod
    def of(cls, path: str, op: str, value: Any, pointer: str) -> DataCondition:
        """A checked condition; INVALID_INPUT (under `pointer`) when the value can't apply."""
        keys = parse_path(path, f"{pointer}/path")
        if op not in OPS:
            raise _bad(f"unknown data operator {op!r}", f"{pointer}/op")
        where = f"{pointer}/value"
        if op in ("EQ", "NE") and not _is_scalar(value):
            raise _bad(f"{op} compares with a string, number, boolean or null", where)
        if op in RANGE_OPS and (
            isinstance(value, bool) or not isinstance(value, (str, int, float))
        ):
            raise _bad(f"{op} compares with a number or a string", where)
        if op == "IN" and (
            not isinstance(value, list)
            or not 0 < len(value) <= MAX_IN
            or not all(_is_scalar(v) for v in value)
        ):
            raise _bad(f"IN takes a list of 1 to {MAX_IN} scalars", where)
        if op == "CONTAINS" and value is None:
            raise _bad("CONTAINS needs a value", where)
        if op == "EXISTS":
            if value is None:
                value = True
            if not isinstance(value, bool):
                raise _bad("EXISTS takes true or false (default true)", where)
        return cls(keys, op, value)


@dataclass(frozen=True)
class Ordering:
    """Sort key of a listing; `path` only for `DATA`. Ties are broken by id."""

    field: str = "CREATED"
    direction: str = "ASC"
    path: tuple[str, ...] = ()

    @classmethod
    def of(cls, field: str, direction: str, path: str | None, allowed: tuple[str, ...]) -> Ordering:
        """A checked ordering (INVALID_INPUT at `/orderBy/...` otherwise)."""
        if field not in allowed:
            raise _bad(f"cannot order by {field!r}", "/orderBy/field")
        if direction not in DIRECTIONS:
            raise _bad(f"unknown direction {direction!r}", "/orderBy/direction")
        if field == "DATA":
            if path is None:
                raise _bad("ordering by DATA needs a path", "/orderBy/path")
            return cls(field, direction, parse_path(path, "/orderBy/path"))
        if path is not None:
            raise _bad("a path only goes with DATA", "/orderBy/path")
        return cls(field, direction)

    @property
    def tag(self) -> str:
        """What a cursor records of this ordering, so it is not reused with another."""
        return ".".join((self.field, self.direction, *self.path))


@dataclass(frozen=True)
class InstanceSearch:
    """Which instances (None / empty = any). Visibility is applied on top of this."""

    workflow: str | None = None
    namespace: str | None = None
    state: str | None = None
    statuses: tuple[str, ...] = ()
    parent: str | None = None
    assignee: str | None = None
    team: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    sla_breached: bool | None = None
    stale: bool | None = None
    data: tuple[DataCondition, ...] = field(default=())

    def __post_init__(self) -> None:
        if len(self.data) > MAX_CONDITIONS:
            raise _bad(f"at most {MAX_CONDITIONS} data conditions", "/filter/data")


@dataclass(frozen=True)
class AssignmentSearch:
    """Which assignments (None / empty = any). Visibility is applied on top of this."""

    statuses: tuple[str, ...] = ()
    team: str | None = None
    assignee: str | None = None
    candidate: str | None = None
    due_before: datetime | None = None
    min_priority: int | None = None
    namespace: str | None = None
    process: str | None = None
    #: `myAssignments`: claimed by this actor, or unassigned naming it a candidate in a
    #: namespace of `mine_readable` (or below).
    mine: str | None = None
    mine_readable: tuple[str, ...] = ()


#: What `instanceCounts` / `assignmentCounts` may group by.
INSTANCE_GROUPS = ("WORKFLOW", "STATE", "STATUS")
ASSIGNMENT_GROUPS = ("TEAM", "STATUS", "ASSIGNEE")


def check_groups(groups: tuple[str, ...], allowed: tuple[str, ...]) -> tuple[str, ...]:
    """`groups` without repeats, each one of `allowed` (INVALID_INPUT at `/groupBy`)."""
    if not groups or len(set(groups)) != len(groups) or not set(groups) <= set(allowed):
        raise _bad(f"groupBy takes 1 to {len(allowed)} distinct of {', '.join(allowed)}",
                   "/groupBy")  # fmt: skip
    return groups


@dataclass(frozen=True)
class AuditSearch:
    """Which events of the audit log (None = any); `since`/`until` bound the server's
    recording time (inclusive, exclusive)."""

    actor: str | None = None
    namespace: str | None = None
    workflow: str | None = None
    action: str | None = None
    process: str | None = None
    since: datetime | None = None
    until: datetime | None = None
