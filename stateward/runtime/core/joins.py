"""Children tell their parent they ended (DSL 2.1): the `$child` kernel event.

Every spawned child is linked to its parent, also one in another namespace (its parent's
namespace holds that namespace's `allow_spawn` grant): such a child's end reaches its
parent while the grant holds — the grant is what lets the parent see the child's status
and the `returns` the child's own workflow hands back; withdrawn, the child is as
invisible to the parent as it is to the parent's readers, and is not reported.

Part of the one write path (`writes` calls `tell_parent`), so it lives in the core; the
composition root registers `op_child` like every other `$` operation.

When an event ends a spawned child (`completed` or `cancelled`) and the parent's workflow
awaits children (`await`), the SAME transaction appends a `$child` event to the parent:
system actor, attested by the node key, input `{child, workflow, status, result}` with
`result` = the child's terminal state's `returns` keys. The engine records it on the parent
and performs the join's `then` action when the condition first holds (`domain.joins`).

Exactly once, also across nodes: the child's end and the parent's `$child` commit or roll
back together, and two children ending at once both write the parent's next seq — one
wins, the other loses the unique (process, seq) and is re-evaluated on fresh state (act's
retry), so each child is recorded once and the join sees every child exactly once.

Deadlock-free by construction (issue 11): an event of a child may write its parent, and
through the parent's join its grandparent, and so on. Those ancestors
(`awaiting_ancestors`: each parent whose workflow awaits children, up the chain) are
locked with the child's own row at the START of the transaction, all sorted by id (step 1
of the lock order, `persistence/sequencer.py`) — for single events, group-commit batches
and `actMany` alike — so a child never takes its parent's row lock after its own, and no
two transactions can each hold a row the other waits for.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from stateward.domain.errors import FORBIDDEN, NOT_FOUND, DomainError
from stateward.domain.joins import CHILD, FINISHED, returns_of
from stateward.domain.model import LIVE_STATUSES, SYSTEM_ACTOR, Actor, Outcome
from stateward.domain.plan import plan_for
from stateward.governance.envelope import build_envelope
from stateward.governance.verification import sign_envelope
from stateward.records import INSTANCE, ProcessRecord
from stateward.runtime.core import references
from stateward.runtime.core.kernel import ActContext, apply_engine, evaluate

if TYPE_CHECKING:
    from stateward.persistence import UnitOfWork
    from stateward.runtime.core.services import Runtime

SYSTEM = Actor(id=SYSTEM_ACTOR)
#: Bound of `Runtime.ancestry` (cleared when full: it is only a cache of immutable facts).
ANCESTRY_CACHE = 100_000


async def awaiting_ancestors(runtime: Runtime, uow: UnitOfWork, ids: Iterable[str]) -> set[str]:
    """The ancestors that an event of the processes `ids` may write through `$child`: the
    parent when its workflow awaits children, then that parent's parent on the same terms,
    and so on. Lock them with `ids`, in id order, at the start of the transaction.

    Read without locks (a parent link and a pinned version never change) and remembered
    per process (`Runtime.ancestry`). Empty on SQLite, whose single writer serialises."""
    if uow.dialect != "postgresql":
        return set()
    cache = runtime.ancestry
    ids = list(dict.fromkeys(ids))
    missing = [i for i in ids if i not in cache]
    if missing:
        if len(cache) > ANCESTRY_CACHE:
            cache.clear()
        rows = await uow.processes.processes_by_ids(missing)
        for pid in missing:
            row = rows.get(pid)
            if row is not None:  # a process not stored yet is a `$start`: nothing to tell
                cache[pid] = await _chain(runtime, uow, row)
    return {a for i in ids for a in cache.get(i, ())}


async def _chain(runtime: Runtime, uow: UnitOfWork, row: ProcessRecord) -> tuple[str, ...]:
    """`row`'s awaiting ancestors, nearest first (remembering the parents' on the way)."""
    if row.parent_id is None:
        return ()
    cached = runtime.ancestry.get(row.parent_id)
    parent = await uow.processes.get(row.parent_id)
    if parent is None or not await awaits_children(runtime, uow, parent):
        return ()
    if cached is None:
        cached = runtime.ancestry[parent.id] = await _chain(runtime, uow, parent)
    return (parent.id, *cached)


async def awaits_children(runtime: Runtime, uow: UnitOfWork, parent: ProcessRecord) -> bool:
    """True when `parent` is told of its children's ends (its workflow has an `await`)."""
    if parent.kind != INSTANCE:
        return False
    definition = await runtime.definition(uow, parent.workflow, parent.workflow_version)
    return plan_for(definition).joins


async def op_child(ctx: ActContext) -> Outcome:
    """`$child {child, workflow, status, result}` (system): a child of this instance ended."""
    if not ctx.actor.is_system:
        raise DomainError(FORBIDDEN, "$child is a system operation")
    if ctx.process is None or ctx.process.kind != INSTANCE:
        raise DomainError(NOT_FOUND, f"instance {ctx.envelope.process} does not exist")
    return apply_engine(ctx)


def ends_child(ctx: ActContext, record: ProcessRecord, outcome: Outcome) -> bool:
    """True when this event ended a spawned child (`completed`, `cancelled` or `error`;
    an errored child's cancel is reported too, so the parent's view stays true). A child
    spawned straight into a terminal state is reported by its parent's event
    (`writes.write_event`), after the parent's own event."""
    old = ctx.process
    return (
        record.kind == INSTANCE
        and record.parent_id is not None
        and old is not None
        and old.status in (*LIVE_STATUSES, "error")
        and outcome.status in FINISHED
        and outcome.status != old.status
    )


def born_ended(record: ProcessRecord, outcome: Outcome) -> bool:
    """True when a `$start` created a linked child that has already ended."""
    return record.parent_id is not None and outcome.status in FINISHED


async def tell_parent(ctx: ActContext, record: ProcessRecord, outcome: Outcome) -> Any:
    """Append the parent's `$child` event for the child `record` (same transaction); the
    parent's `Written`, or None when the parent does not await children."""
    from stateward.runtime.core.writes import write_event  # writes calls this module back

    runtime, uow = ctx.runtime, ctx.uow
    assert record.parent_id is not None
    parent = await uow.processes.get(record.parent_id)
    if parent is None or not await awaits_children(runtime, uow, parent):
        return None  # a v2 parent: nothing to join, its log stays as it was
    if not await references.may_spawn(uow, parent.namespace, record.workflow):
        return None  # another namespace's child whose grant was withdrawn: not visible
    # Already held since the transaction's start (`awaiting_ancestors`); locking it again
    # costs nothing and re-reads it under the lock.
    parent = await uow.processes.get(parent.id, for_update=True)
    assert parent is not None
    definition = await runtime.definition(uow, parent.workflow, parent.workflow_version)
    result = returns_of(ctx.definition.states.get(outcome.state), outcome.data)
    payload = {
        "child": record.id,
        "workflow": record.workflow,
        "status": outcome.status,
        "result": result,
    }
    envelope = build_envelope(
        runtime.net, parent.id, CHILD, parent.workflow, payload, SYSTEM_ACTOR, ctx.envelope.ts
    )
    identity = envelope.identity()
    parent_ctx = ActContext(
        runtime=runtime,
        uow=uow,
        signed=sign_envelope(envelope, runtime.node_key),
        identity=identity,
        now=ctx.now,
        actor=SYSTEM,
        definition=definition,
        process=parent,
        kind=INSTANCE,
        namespace=parent.namespace,
        workflow=parent.workflow,
        version=parent.workflow_version,
    )
    joined = evaluate(
        definition, parent_ctx.snapshot(), name=CHILD, input=payload, actor=SYSTEM,
        ts=envelope.ts, event_id=identity, process_id=parent.id,
    )  # fmt: skip
    ctx.touched.add(parent.id)
    return await write_event(parent_ctx, joined)
