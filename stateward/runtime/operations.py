"""The kernel operation table of the features (DESIGN §6, §7): the composition root's half.

The core (`core.kernel`) owns the table and its own `$start`, `$cancel` and `$advance`;
it never imports a feature. This module names every other `$` operation and the feature
function that evaluates it, and `install()` registers them, plus the governance operation
of registry events, into the core's table. `stateward.runtime` calls `install()` when it is
imported, so every `Runtime` (the server's, the CLI's, a test's) dispatches the same
operations, whichever feature modules its caller happened to import.
"""

from __future__ import annotations

from stateward.runtime.access import governance_ops
from stateward.runtime.core import joins
from stateward.runtime.core.kernel import KernelOp, register, register_governance
from stateward.runtime.hooks import automation, calls
from stateward.runtime.messages import correlate
from stateward.runtime.operate import incidents, migration
from stateward.runtime.public import entry
from stateward.runtime.queues import assignments
from stateward.runtime.sweeps import scheduler, sla, staleness, webhooks

#: Every kernel operation of a feature package, by its reserved `$` name.
OPERATIONS: dict[str, KernelOp] = {
    assignments.CLAIM: assignments.op_claim,
    assignments.UNCLAIM: assignments.op_unclaim,
    assignments.ASSIGNMENT_CANCEL: assignments.op_assignment_cancel,
    assignments.COMPLETE: assignments.op_complete,
    entry.ENTRY_TOKEN: entry.op_entry_token,
    sla.SLA: sla.op_sla,
    scheduler.TIMER: scheduler.op_timer,
    staleness.STALE: staleness.op_stale,
    automation.AUTOMATE: automation.op_automate,
    correlate.MESSAGE: correlate.op_message,  # issue 15: a message delivered
    joins.CHILD: joins.op_child,  # DSL 2.1: a child ended (written by the core's writes)
    migration.MIGRATE: migration.op_migrate,  # issue 15: move an instance to another version
    incidents.RETRY: incidents.op_retry,  # issue 15: an operator re-runs a failed hook
    incidents.RESOLVE: incidents.op_resolve,  # issue 15: cancel or an action instead
    calls.HOOK_WRITE: calls.op_hook_write,  # issue 13: a parent's hook wrote this child
    webhooks.WEBHOOK: webhooks.op_webhook,  # issue 15: a delivery exhausted (or recovered)
}


def install() -> None:
    """Register `OPERATIONS` and the governance operation in the core's table (idempotent)."""
    for name, op in OPERATIONS.items():
        register(name, op)
    register_governance(governance_ops.op_governance)
