"""Registers the kernel operations of the runtime services (DESIGN §6, §7).

Importing this module imports every service module that registers a `$` operation in
`kernel.KERNEL_OPS`: `$claim $unclaim $complete $assignment_cancel` (assignments),
`$entry_token` (public), `$sla` (sla), `$timer` (scheduler), `$stale` (staleness) and
`$automate` (automation). `kernel.select_op` imports it on first need, so an envelope
submitted by a client finds its operation even if no service was imported yet.
"""

from __future__ import annotations

import stateward.runtime.hooks.automation
import stateward.runtime.public.entry
import stateward.runtime.queues.assignments
import stateward.runtime.sweeps.scheduler
import stateward.runtime.sweeps.sla
import stateward.runtime.sweeps.staleness

#: The modules whose import registered kernel operations.
MODULES = (
    stateward.runtime.queues.assignments,
    stateward.runtime.hooks.automation,
    stateward.runtime.public.entry,
    stateward.runtime.sweeps.scheduler,
    stateward.runtime.sweeps.sla,
    stateward.runtime.sweeps.staleness,
)
