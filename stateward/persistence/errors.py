"""Conflicts the database detects, as distinguishable exceptions.

A unique-constraint violation on `events` means someone else got there first:
`SeqConflict` (another event took this process's next seq: retry on fresh state),
`NonceConflict` (the actor's nonce is used already: by another envelope, `REPLAYED`; by
this very envelope, stored before, answered idempotently once the runtime finds the
original — the identity has no unique index of its own, migration 0021). After either
the unit of work's transaction is unusable and must be rolled back.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.exc import InterfaceError as SAInterfaceError

from stateward.domain.errors import CONFLICT, REPLAYED


class PersistenceConflict(Exception):
    """A write lost against a concurrent or earlier write; nothing was committed."""

    code = CONFLICT

    def __init__(self, message: str, *, process_id: str | None = None) -> None:
        super().__init__(message)
        self.process_id = process_id


class SeqConflict(PersistenceConflict):
    """Another event already holds this (process, seq): re-read the process and retry."""


class LockOrderError(RuntimeError):
    """A process row was locked out of the lock order (`persistence/sequencer.py`): a bug
    that could deadlock, refused before it can."""


class NonceConflict(PersistenceConflict):
    """The (actor, nonce) pair is already used by a different envelope."""

    code = REPLAYED


#: Markers in the driver message -> the exception they mean. PostgreSQL names the
#: constraint; SQLite lists the columns.
_MARKERS: tuple[tuple[tuple[str, ...], type[PersistenceConflict]], ...] = (
    (("uq_events_actor_nonce", "events.actor, events.nonce"), NonceConflict),
    (("uq_events_process_id_seq", "events.process_id, events.seq"), SeqConflict),
)


def classify_integrity_error(
    error: IntegrityError, process_id: str | None = None
) -> PersistenceConflict | None:
    """The conflict `error` stands for, or None when it is some other integrity error."""
    message = str(error.orig)
    for markers, kind in _MARKERS:
        if any(m in message for m in markers):
            return kind(f"{kind.__name__}: {message.splitlines()[0]}", process_id=process_id)
    return None


#: SQLSTATEs of faults that say nothing about the statement itself: the transaction may
#: succeed when run again. 40001 serialization failure, 40P01 deadlock victim, 55P03 lock
#: not available (`lock_timeout`), 57014 query cancelled (`statement_timeout`), 57P01-03
#: admin/crash shutdown, cannot connect now (`pg_terminate_backend`, restarts), 25P03 idle
#: in transaction timeout, class 08 connection exceptions.
TRANSIENT_SQLSTATES = frozenset(
    {"40001", "40P01", "55P03", "57014", "57P01", "57P02", "57P03", "25P03", "53300"}
)
#: Driver messages that mean "this connection is gone or unusable" (asyncpg raises some of
#: them as InterfaceError / InternalClientError without a SQLSTATE; SQLite's busy lock).
_TRANSIENT_MARKERS = (
    "connection is closed",
    "connection was closed",
    "another operation is in progress",
    "cannot switch to state",
    "cannot perform operation",
    "database is locked",
    "terminating connection",
    "server closed the connection",
)


def sqlstate_of(error: BaseException) -> str | None:
    """The SQLSTATE of a driver error (through SQLAlchemy's wrapper), if it has one."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for attribute in ("sqlstate", "pgcode"):
            value = getattr(current, attribute, None)
            if isinstance(value, str) and value:
                return value
        current = getattr(current, "orig", None) or current.__cause__
    return None


def is_transient(error: BaseException) -> bool:
    """True for a database fault worth retrying the whole transaction for: a dropped or
    killed connection, a serialization failure, a deadlock victim, a lock or statement
    timeout. Constraint violations and programming errors are never transient.

    Retrying is safe for event writes: the process seq check (and the unique identity)
    makes an event committed once or not at all, whatever happened to the first try.
    """
    if isinstance(error, (IntegrityError, PersistenceConflict)):
        return False
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return True
    state = sqlstate_of(error)
    if state is not None:
        return state in TRANSIENT_SQLSTATES or state.startswith("08")
    if isinstance(error, (ConnectionError, TimeoutError, SAInterfaceError)):
        return True
    if isinstance(error, (DBAPIError, OSError)) or _is_driver_error(error):
        text = str(error).lower()
        return any(marker in text for marker in _TRANSIENT_MARKERS)
    return False


def _is_driver_error(error: BaseException) -> bool:
    """asyncpg's own exceptions when they escape SQLAlchemy's translation."""
    return type(error).__module__.startswith("asyncpg")
