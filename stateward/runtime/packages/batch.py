"""`act_many`: several signed envelopes applied by `act`'s path in ONE transaction.

Some operations are all-or-nothing over several events (importing a package deploys
every module and workflow of it, or none): each envelope is verified and applied exactly
as `act` does (`apply_in`: revocation, roles, kernel operation or governance, event row,
effects, outbox rows), but all of them inside one unit of work, committed once. When any
of them fails, nothing is written and the error names the envelope (`details.index`).
Publishing and automation run after the single commit, in envelope order.

Inside the batch, `PENDING_WORKFLOWS` (a key of the unit of work's `session.info`, which
commit and rollback clear) holds the workflow paths the batch deploys, so a definition may
spawn another workflow of the same batch — even a later one, or one that spawns it back:
they become visible together at commit.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from functools import partial

from sqlalchemy.exc import IntegrityError

from stateward.domain.errors import CONFLICT, REPLAYED, DomainError
from stateward.governance.envelope import SignedEnvelope
from stateward.persistence import NonceConflict, SeqConflict
from stateward.persistence.retry import retry_transient
from stateward.runtime.access.governance_ops import PENDING_WORKFLOWS
from stateward.runtime.core.act import (
    MAX_ATTEMPTS,
    ActResult,
    _verify_signature,
    after_commit,
    apply_in,
    lock_family,
    result_of,
)
from stateward.runtime.core.services import Runtime
from stateward.runtime.core.writes import Written


async def act_many(
    runtime: Runtime,
    signed: Sequence[SignedEnvelope],
    *,
    attested: bool,
    pending_workflows: Collection[str] = (),
) -> list[ActResult]:
    """Verify and apply every envelope of `signed`, in order, in one transaction.

    All commit or none does. A failing envelope raises its error with `details.index`
    (its position in `signed`) and nothing is written. Server-attested batches that lose
    a seq race are re-evaluated on fresh state; client-signed ones are answered CONFLICT.
    Unlike `act`, a batch is not idempotent on resubmission: an envelope that was already
    applied makes the whole batch fail with REPLAYED.
    """
    if not signed:
        return []
    now = runtime.clock.now()
    for index, item in enumerate(signed):
        try:
            await _verify_signature(runtime, item, now)
        except DomainError as error:
            raise _at(error, index) from error
    identities = [item.envelope.identity() for item in signed]
    written: list[Written] | None = None
    for _attempt in range(MAX_ATTEMPTS if attested else 1):
        try:
            written = await retry_transient(
                partial(_apply_all, runtime, signed, identities, now, pending_workflows),
                what="batch of events",
            )
            break
        except SeqConflict:
            now = runtime.clock.now()
            continue
        except NonceConflict as error:
            raise DomainError(
                REPLAYED, f"an envelope of the batch was already applied: {error}"
            ) from error
        except IntegrityError as error:
            raise DomainError(CONFLICT, f"concurrent write during a batch: {error}") from error
    if written is None:
        raise DomainError(CONFLICT, "the batch's processes changed concurrently; try again")
    for done in written:
        await after_commit(runtime, done)
    return [result_of(done) for done in written]


async def _apply_all(
    runtime: Runtime,
    signed: Sequence[SignedEnvelope],
    identities: Sequence[str],
    now: datetime,
    pending_workflows: Collection[str],
) -> list[Written]:
    """One unit of work: apply every envelope, then commit (rolled back on any error)."""
    async with runtime.uow() as uow:
        uow.session.info[PENDING_WORKFLOWS] = frozenset(pending_workflows)
        # Lock order step 1: every existing process of the batch and the ancestors their
        # events may write (`$child`), in id order.
        await lock_family(runtime, uow, (item.envelope.process for item in signed))
        written = []
        for index, (item, identity) in enumerate(zip(signed, identities, strict=True)):
            try:
                written.append(await apply_in(runtime, uow, item, identity, now))
            except DomainError as error:
                raise _at(error, index) from error
        await uow.commit()
    return written


def _at(error: DomainError, index: int) -> DomainError:
    """`error` with `details.index` set to the failing envelope's position."""
    error.details.setdefault("index", index)
    return error
