"""Registers the kernel operations of the runtime services (DESIGN §6, §7).

Importing this module imports every service module that registers a `$` operation in
`kernel.KERNEL_OPS`: `$claim $unclaim $complete $assignment_cancel` (assignments),
`$entry_token` (public), `$sla` (sla), `$timer` (scheduler), `$stale` (staleness) and
`$automate` (automation). `kernel.select_op` imports it on first need, so an envelope
submitted by a client finds its operation even if no service was imported yet.
"""

from __future__ import annotations

from stateward.runtime import (  # noqa: F401  (imported for their registrations)
    assignments,
    automation,
    public,
    scheduler,
    sla,
    staleness,
)
