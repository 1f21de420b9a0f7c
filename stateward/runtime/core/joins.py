"""Children tell their parent they ended (DSL 2.1): the `$child` kernel event.

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
retry), so each child is recorded once and the join sees every child exactly once. The
parent row is read `FOR UPDATE` (PostgreSQL) after the child's, always child -> parent.
"""

from __future__ import annotations

from typing import Any

from stateward.domain.errors import FORBIDDEN, NOT_FOUND, DomainError
from stateward.domain.joins import CHILD, FINISHED, returns_of
from stateward.domain.model import LIVE_STATUSES, SYSTEM_ACTOR, Actor, Outcome
from stateward.domain.plan import plan_for
from stateward.governance.envelope import build_envelope
from stateward.governance.verification import sign_envelope
from stateward.records import INSTANCE, ProcessRecord
from stateward.runtime.core.kernel import ActContext, apply_engine, evaluate

SYSTEM = Actor(id=SYSTEM_ACTOR)


async def op_child(ctx: ActContext) -> Outcome:
    """`$child {child, workflow, status, result}` (system): a child of this instance ended."""
    if not ctx.actor.is_system:
        raise DomainError(FORBIDDEN, "$child is a system operation")
    if ctx.process is None or ctx.process.kind != INSTANCE:
        raise DomainError(NOT_FOUND, f"instance {ctx.envelope.process} does not exist")
    return apply_engine(ctx)


def ends_child(ctx: ActContext, record: ProcessRecord, outcome: Outcome) -> bool:
    """True when this event ended a spawned child that was live before it."""
    old = ctx.process
    return (
        record.kind == INSTANCE
        and record.parent_id is not None
        and old is not None
        and old.status in (*LIVE_STATUSES, "error")
        and outcome.status in FINISHED
    )


async def tell_parent(ctx: ActContext, record: ProcessRecord, outcome: Outcome) -> Any:
    """Append the parent's `$child` event for the child `record` (same transaction); the
    parent's `Written`, or None when the parent does not await children."""
    from stateward.runtime.core.writes import write_event  # writes calls this module back

    runtime, uow = ctx.runtime, ctx.uow
    assert record.parent_id is not None
    parent = await uow.processes.get(record.parent_id, for_update=True)
    if parent is None or parent.kind != INSTANCE:
        return None
    definition = await runtime.definition(uow, parent.workflow, parent.workflow_version)
    if not plan_for(definition).joins:
        return None  # a v2 parent: nothing to join, its log stays as it was
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
