"""Running a transaction again after a transient database fault.

A dropped or killed connection, a serialization failure, a deadlock victim, a lock or
idle timeout (`errors.is_transient`) says nothing about the work itself: the server runs
the whole unit of work again, after a short jittered pause, instead of answering the
client `INTERNAL_ERROR`. For event writes this is safe by construction: an event is
committed once or not at all (the process seq check and the unique envelope identity),
so a retry after an ambiguous COMMIT finds the original (`duplicate`).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from stateward.domain.errors import UNAVAILABLE, DomainError
from stateward.persistence.errors import is_transient

T = TypeVar("T")
log = logging.getLogger(__name__)

#: How many times a unit of work is run again after transient faults (then it raises).
TRANSIENT_ATTEMPTS = 8
_FIRST_PAUSE = 0.02
_MAX_PAUSE = 1.0


def pause_before(attempt: int) -> float:
    """Seconds to wait before retry number `attempt` (1-based): doubling from 20 ms, at
    most 1 s, ±50 % jitter so that the nodes that collided do not collide again."""
    base = min(_MAX_PAUSE, _FIRST_PAUSE * (2 ** max(0, attempt - 1)))
    return base * random.uniform(0.5, 1.5)


def describe(error: BaseException) -> str:
    """`Type: first line` of an error, for one-line log messages."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


async def retry_transient(
    operation: Callable[[], Awaitable[T]],
    *,
    what: str,
    attempts: int = TRANSIENT_ATTEMPTS,
) -> T:
    """`await operation()`, run again (up to `attempts` more times) while it fails with a
    transient database fault. `operation` must open its own unit of work."""
    attempt = 0
    while True:
        try:
            return await operation()
        except Exception as error:
            if not is_transient(error) or attempt >= attempts:
                raise
            attempt += 1
            log.info("%s: transient database fault (%s); retry %d", what, describe(error),
                     attempt)  # fmt: skip
            await asyncio.sleep(pause_before(attempt))


def unavailable(error: BaseException, advice: str = "try again") -> DomainError | None:
    """`UNAVAILABLE` (a coded refusal the client can act on: `advice`) for a transient
    database fault, None for any other error. For a fault that outlasted every retry, and
    for one that reached the API from a read that has no retry of its own: the client is
    told to try again instead of receiving `INTERNAL_ERROR` for a fault that says nothing
    about its request (issue 11)."""
    if not is_transient(error):
        return None
    # The driver's words stay in the server's log: they are no business of the client's.
    refusal = DomainError(UNAVAILABLE, f"the database was unavailable; {advice}")
    refusal.__cause__ = error
    return refusal


async def read_retrying(
    operation: Callable[[], Awaitable[T]], *, what: str, advice: str = "try again"
) -> T:
    """A read-only unit of work run like `retry_transient`; when the database stays
    unreachable through every retry, `UNAVAILABLE` (a coded refusal saying what to do:
    `advice`) instead of the driver's exception. Long-lived readers (subscription streams)
    use it so that a dropped connection is retried, and a lasting outage ends the stream
    with a code the client can act on: resume with `after` later (issue 11)."""
    try:
        return await retry_transient(operation, what=what)
    except Exception as error:
        refusal = unavailable(error, advice)
        if refusal is None:
            raise
        raise refusal from error
