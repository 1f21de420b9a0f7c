"""Registers the kernel operations of the runtime services (DESIGN §6, §7).

Importing this module imports every service module that registers a `$` operation in
`kernel.KERNEL_OPS`: `$claim $unclaim $complete $assignment_cancel` (assignments),
`$entry_token` (public), `$sla` (sla), `$timer` (scheduler), `$stale` (staleness) and
`$automate` (automation). `kernel.select_op` imports it on first need, so an envelope
submitted by a client finds its operation even if no service was imported yet.
"""

from __future__ import annotations

import stateward.runtime.assignments
import stateward.runtime.automation
import stateward.runtime.public
import stateward.runtime.scheduler
import stateward.runtime.sla
import stateward.runtime.staleness

#: The modules whose import registered kernel operations.
MODULES = (
    stateward.runtime.assignments,
    stateward.runtime.automation,
    stateward.runtime.public,
    stateward.runtime.scheduler,
    stateward.runtime.sla,
    stateward.runtime.staleness,
)
