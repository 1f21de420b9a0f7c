"""Automated states (DESIGN §5, §7): run a `system` state's hook, record it, advance.

When an event enters a `system` state with a hook, the core calls the runtime's
automation hooks after commit; `install` adds ours. `automate` loads the instance and the
hook's module (deployed with `add_module`), runs `def fn(ctx)` in the Starlark sandbox
with ctx `{instance_id, workflow, state, data, metadata, input}`, then appends ONE `$automate`
system event whose input records the module (namespace, name, version, hash) and the
hook's result — so `verify` replays it without running Starlark. The engine merges the
result like `$merge` and advances (`$action` routing). A hook that fails or times out,
a result that cannot be recorded, or an 11th consecutive automated event (cycle guard,
counted by the core in `automation_chain`) gives an `$automate` event that puts the
process in status `error` with the reason. The event that entered the state stands.

Recovery (`recover`, run by the ticker) also re-sends the children's `$hook_write`
follow-ups a crash lost (`calls.recover_follow_ups`). The automation starts after the
commit, so a node that dies in between leaves the instance waiting. The entering event stamps
`automation_at`; `$automate` (or leaving the state) clears it. Instances stamped longer
than `recovery_grace` ago are found by a range scan of a pending-only partial index,
claimed by a conditional update (the stamp moves to now: one node per grace period runs
the hook) and handed to the installed automation again. `op_automate` re-checks state and
seq inside the event's transaction, so a late original run and a recovery run never both
record: the second is `not_due` and skipped.

Retries (issue 15): a state's `retries: {max, backoffSeconds}` re-runs a failing hook up to
`max` more times, `backoffSeconds` apart, inside one automation; only the last failure is
recorded (its `$automate` input says how many runs it took, `attempts`, which the incident
opened by that event counts). A backoff longer than the recovery grace may let the
recovery sweep start a second run meanwhile; the seq check above keeps one record.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from stateward.domain.branching import ON_ADVANCE, ROUTE
from stateward.domain.errors import DomainError
from stateward.domain.hookcalls import WORKFLOW_KEY
from stateward.domain.hookrouting import waiting_hooks
from stateward.domain.lifecycle import MAX_AUTOMATION_CHAIN
from stateward.domain.model import LIVE_STATUSES, Outcome
from stateward.persistence import UnitOfWork
from stateward.persistence.kernel import AutomationCandidate
from stateward.records import INSTANCE, StoredEvent
from stateward.runtime.core import references
from stateward.runtime.core.kernel import ActContext, apply_engine
from stateward.runtime.core.ops_support import (
    drain,
    input_str,
    is_not_due,
    kernel_repo,
    not_due,
    require_instance,
    require_system,
    system_act,
)
from stateward.runtime.core.services import Runtime
from stateward.runtime.hooks import calls
from stateward.runtime.hooks.runner import HookModule, HookRef, HookRunner, parse_hook_ref
from stateward.settings import Settings

log = logging.getLogger(__name__)

AUTOMATE = "$automate"
HOOK_UNAVAILABLE = "HOOK_NOT_FOUND"
#: A hook whose reads of children went stale on every one of its runs.
HOOK_STALE = "HOOK_STALE"
#: The shortest wait (seconds) before the recovery sweep re-runs a system state's hook.
RECOVERY_FLOOR = 5.0
BATCH = 100


async def op_automate(ctx: ActContext) -> Outcome:
    """`$automate {hook, after, module?, result | error}` (system): the recorded run of
    the current system state's hook, applied by the engine (merge + advance, or error)."""
    require_system(ctx)
    process = require_instance(ctx)
    hook = input_str(ctx, "hook")
    state = ctx.definition.states.get(process.state)
    after = ctx.input.get("after")
    if (
        process.status not in LIVE_STATUSES
        or hook not in waiting_hooks(state)
        or (isinstance(after, int) and after != process.seq)
    ):
        raise not_due(f"{process.id} is not waiting for hook {hook} (seq {process.seq})")
    await calls.check_reads(ctx, ctx.input.get(WORKFLOW_KEY))
    return apply_engine(ctx)


def install(runtime: Runtime, runner: HookRunner) -> Callable[[Runtime, str, str], Awaitable[None]]:
    """Make `runtime` run system-state hooks with `runner` after each commit that enters
    such a state; returns the installed hook (remove it from `runtime.automation` to stop)."""

    async def run(rt: Runtime, process_id: str, hook: str) -> None:
        await automate(rt, runner, process_id, hook)

    runtime.automation.append(run)
    return run


async def automate(runtime: Runtime, runner: HookRunner, process_id: str, hook: str) -> bool:
    """Run `hook` for the instance waiting in its system state and append the `$automate`
    event (then the `$hook_write` of each child the hook wrote through `workflow.*`);
    False when the instance is not (or no longer) waiting for it. A run whose reads of
    children went stale before its event was recorded is run again (`STALE_RETRIES`)."""
    for _ in range(calls.STALE_RETRIES):
        try:
            return await _automate_once(runtime, runner, process_id, hook)
        except _Stale:
            continue
    async with runtime.uow(readonly=True) as uow:
        process = await uow.processes.get(process_id)
    if process is None:
        return False
    input = {"hook": hook, "after": process.seq, "code": HOOK_STALE,
             "error": f"{HOOK_STALE}: the children the hook read kept changing "
                      f"({calls.STALE_RETRIES} runs)"}  # fmt: skip
    return await _record(runtime, process.id, process.workflow, input) is not None


class _Stale(Exception):
    """The `$automate` was refused because a child the hook read moved on."""


async def _automate_once(runtime: Runtime, runner: HookRunner, process_id: str, hook: str) -> bool:
    """One run of `automate` (raises `_Stale` when its reads went stale)."""
    async with runtime.uow(readonly=True) as uow:
        process = await uow.processes.get(process_id)
        if process is None or process.kind != INSTANCE or process.status not in LIVE_STATUSES:
            return False
        definition = await runtime.definition(uow, process.workflow, process.workflow_version)
        state = definition.states.get(process.state)
        if hook not in waiting_hooks(state):
            return False
        last = await uow.events.get(process.id, process.seq)
        ref = parse_hook_ref(hook)
        module = None
        if isinstance(ref, HookRef):
            owner = ref.namespace or process.namespace
            # Another namespace's module runs only while it shares it with this one
            # (`share_module`, checked again at every run): else it is "not deployed".
            if await references.may_use_module(uow, process.namespace, owner, ref.module):
                module = await uow.modules.get(owner, ref.module)
        reachable = await calls.world(uow, process) if module is not None else None
    input: dict[str, Any] = {"hook": hook, "after": process.seq}
    if process.automation_chain >= MAX_AUTOMATION_CHAIN:
        input["guard"] = True  # the engine refuses the 11th automated event: no run
    elif module is None or not isinstance(ref, HookRef):
        input.update(error=f"{HOOK_UNAVAILABLE}: module of hook {hook} is not deployed",
                     code=HOOK_UNAVAILABLE)  # fmt: skip
    else:
        input["module"] = {
            "namespace": module.namespace, "name": module.name, "version": module.version,
            "hash": module.hash,
        }  # fmt: skip
        ctx = {
            "instance_id": process.id,
            "workflow": process.workflow,
            "state": process.state,
            "data": dict(process.data),
            "metadata": dict(process.instance_metadata or {}),
            "input": dict(last.input) if last is not None and isinstance(last.input, dict) else {},
        }
        spec = state.retries if state is not None else None
        runs = 1 + (spec.max if spec is not None else 0)
        for attempt in range(1, runs + 1):
            result = await runner.run(
                HookModule(module.namespace, module.name, module.source),
                ref.function,
                ctx,
                runtime.settings.hook_timeout_ms,
                world=reachable,
            )
            if result.ok or attempt == runs:
                break
            if spec is not None and spec.backoff_seconds > 0:  # state `retries` (issue 15)
                await asyncio.sleep(spec.backoff_seconds)
        if runs > 1:
            input["attempts"] = attempt
        if result.ok:
            input["result"] = result.value
            if result.workflow is not None:
                input[WORKFLOW_KEY] = result.workflow
        else:
            input.update(error=f"{result.error_code}: {result.error}", code=result.error_code)
    recorded = await _record(runtime, process.id, process.workflow, input)
    record = recorded.input.get(WORKFLOW_KEY) if recorded is not None else None
    if recorded is not None and isinstance(record, dict):
        await calls.follow_up(runtime, process.id, recorded.seq, record)
    return recorded is not None


async def _record(
    runtime: Runtime, process_id: str, workflow: str, input: dict[str, Any]
) -> StoredEvent | None:
    """Append the `$automate` event (None: not due); a result the log cannot hold
    becomes an error. Raises `_Stale` when the hook's reads of children went stale."""
    try:
        return (await system_act(runtime, process_id, workflow, AUTOMATE, input)).event
    except DomainError as error:
        if calls.is_stale_read(error):
            raise _Stale() from error
        if is_not_due(error):
            return None
        if "result" not in input:
            log.warning("automation of %s not recorded: %s %s", process_id, error.code,
                        error.message)  # fmt: skip
            return None
        failed = {k: v for k, v in input.items() if k not in ("result", WORKFLOW_KEY)}
        failed.update(error=f"HOOK_BAD_RESULT: {error.message}", code="HOOK_BAD_RESULT")
        return await _record(runtime, process_id, workflow, failed)


def recovery_grace(settings: Settings) -> float:
    """Seconds a system state's automation may stay unrecorded before the sweep re-runs
    it: max(5 s, 2 x hook timeout), well past the normal run of a hook that ends in time."""
    return max(RECOVERY_FLOOR, 2 * settings.hook_timeout_ms / 1000)


async def recover(
    runtime: Runtime, now: datetime | None = None, *, batch: int = BATCH
) -> list[str]:
    """Re-run the automation of every live instance waiting in a system state since
    before `now - recovery_grace` without its `$automate` event (lost to a crash); returns
    the ids THIS call claimed. Does nothing on a node with no automation installed."""
    if not runtime.automation:
        return []
    now = now or runtime.clock.now()
    cutoff = now - timedelta(seconds=recovery_grace(runtime.settings))
    await calls.recover_follow_ups(runtime, cutoff)
    resumed: list[str] = []

    async def fetch(limit: int) -> list[tuple[AutomationCandidate, str | None]]:
        async with runtime.uow(readonly=True) as uow:
            due = await kernel_repo(uow).pending_automation(cutoff, limit)
            hooks = {c.process_id: await _hook_of(runtime, uow, c) for c in due}
        return [(c, hooks[c.process_id]) for c in due]

    async def handle(item: tuple[AutomationCandidate, str | None]) -> bool:
        candidate, hook = item
        if not await _claim(runtime, candidate, cutoff, now if hook else None) or not hook:
            return False
        await runtime.run_automation(candidate.process_id, hook)
        resumed.append(candidate.process_id)
        return True

    await drain(fetch, lambda item: item[0].process_id, handle, batch)
    return resumed


async def _hook_of(runtime: Runtime, uow: UnitOfWork, c: AutomationCandidate) -> str | None:
    """The hook of the candidate's current state when it is a system state with one."""
    try:
        definition = await runtime.definition(uow, c.workflow, c.workflow_version)
    except DomainError:
        return None
    state = definition.states.get(c.state)
    waiting = waiting_hooks(state)
    if len(waiting) < 2:
        return next(iter(waiting), None)
    # A dynamic state with an on_advance hook: the last event says which one it waits for.
    last = await uow.events.get(c.process_id, c.seq)
    phases = {phase: hook for hook, phase in waiting.items()}
    if last is not None and last.action.endswith("#advance"):
        return phases.get(ON_ADVANCE)
    return phases.get(ROUTE)


async def _claim(
    runtime: Runtime, c: AutomationCandidate, cutoff: datetime, at: datetime | None
) -> bool:
    """Claim a candidate for this node (stamp `at`), or clear a stale stamp (`at=None`)."""
    async with runtime.uow() as uow:
        won = await kernel_repo(uow).claim_automation(c.process_id, c.seq, cutoff, at)
        await uow.commit()
    return won
