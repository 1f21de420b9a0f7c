"""`SharedGrantReads.ready`: the fan-out's way to current grants without waiting (issue 18).

A live subscription delivering from the fan-out loop may not await a grant read: `ready`
answers a completed read of the actor that started at or after `not_before`, or None
after starting that read in the background (once, shared); a revoked key reads as None.
"""

from __future__ import annotations

import time

from stateward.governance.keys import KeyPair
from stateward.runtime.access import auth
from stateward.runtime.access.auth import Viewer
from stateward.runtime.access.registry import revoke_key
from stateward.runtime.core.services import Runtime


async def test_ready_starts_one_shared_read_and_answers_it_once_completed(
    admin_rt: Runtime, operator: KeyPair
) -> None:
    reads = auth.shared_grant_reads(admin_rt)
    viewer = Viewer(operator.public)  # no grants known yet
    since = time.monotonic()
    assert reads.ready(viewer, since) is None  # nothing yet: a read starts in the background
    first = reads.reads[operator.public]
    assert reads.ready(viewer, since) is None  # under way: not started twice
    assert reads.reads[operator.public] is first
    await first[1]
    got = reads.ready(viewer, since)
    assert got is not None
    fresh, started = got
    assert started >= since
    assert fresh is not None and "admin" in fresh.roles_in("system")
    # what `read` answers for the same moment is that same read, without a new one
    assert (await reads.read(viewer, since))[1] == started
    # a read older than `not_before` is not reused: a newer one starts
    assert reads.ready(viewer, time.monotonic()) is None
    assert reads.reads[operator.public] is not first


async def test_a_revoked_key_is_ready_as_none(admin_rt: Runtime, operator: KeyPair) -> None:
    reads = auth.shared_grant_reads(admin_rt)
    viewer = Viewer(operator.public)
    await revoke_key(admin_rt, operator, operator.public)
    since = time.monotonic()
    assert reads.ready(viewer, since) is None
    await reads.reads[operator.public][1]
    assert reads.ready(viewer, since) == (None, reads.reads[operator.public][0])
