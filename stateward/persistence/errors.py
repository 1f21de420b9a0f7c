"""Conflicts the database detects, as distinguishable exceptions.

A unique-constraint violation on `events` means someone else got there first:
`SeqConflict` (another event took this process's next seq: retry on fresh state),
`NonceConflict` (the actor's nonce was used by another envelope: `REPLAYED`),
`DuplicateEvent` (the exact same envelope is already stored: answer idempotently).
After any of them the unit of work's transaction is unusable and must be rolled back.
"""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError

from stateward.domain.errors import CONFLICT, REPLAYED


class PersistenceConflict(Exception):
    """A write lost against a concurrent or earlier write; nothing was committed."""

    code = CONFLICT

    def __init__(self, message: str, *, process_id: str | None = None) -> None:
        super().__init__(message)
        self.process_id = process_id


class SeqConflict(PersistenceConflict):
    """Another event already holds this (process, seq): re-read the process and retry."""


class NonceConflict(PersistenceConflict):
    """The (actor, nonce) pair is already used by a different envelope."""

    code = REPLAYED


class DuplicateEvent(PersistenceConflict):
    """An event with the same identity (sha256 of the canonical envelope) exists."""


#: Markers in the driver message -> the exception they mean. PostgreSQL names the
#: constraint; SQLite lists the columns.
_MARKERS: tuple[tuple[tuple[str, ...], type[PersistenceConflict]], ...] = (
    (("uq_events_identity", "events.identity"), DuplicateEvent),
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
