"""Signed checkpoints of the deployment log: make, keep, announce, list.

`checkpoint(runtime)` signs `{net, size, root, ts}` of the committed tree with the node
key when the log grew since this node's last checkpoint, keeps it (`checkpoints` table)
and announces it on the bus as `log.checkpoint` (an outbox row written in the same
transaction, so watchers can keep checkpoints elsewhere). `Checkpointer` does that every
`settings.checkpoint_interval` seconds (default 10) in the background of a node.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from stateward.domain import events as ev
from stateward.domain.logformat import checkpoint_bytes
from stateward.governance.checkpoint import sign_checkpoint
from stateward.governance.envelope import format_ts, parse_ts
from stateward.records import CheckpointRecord
from stateward.runtime.core.services import Runtime

log = logging.getLogger(__name__)


def _payload(record: CheckpointRecord) -> dict[str, Any]:
    """The §9 bus payload announcing a checkpoint (details: the signed checkpoint)."""
    return {
        ev.F_TYPE: ev.LOG_CHECKPOINT,
        ev.F_AT: json.loads(record.body)["ts"],
        ev.F_NAMESPACE: None,
        ev.F_WORKFLOW: None,
        ev.F_VERSION: None,
        ev.F_INSTANCE_ID: None,
        ev.F_ACTOR: record.signer,
        ev.F_ACTION: ev.LOG_CHECKPOINT,
        ev.F_FROM_STATE: None,
        ev.F_TO_STATE: None,
        ev.F_ASSIGNMENT_ID: None,
        ev.F_TEAM: None,
        ev.F_DETAILS: record.as_json(),
    }


async def checkpoint(runtime: Runtime, *, force: bool = False) -> CheckpointRecord | None:
    """Sign, keep and announce a checkpoint of the current tree; None when the log has
    not grown since this node's last one (or is empty), unless `force`."""
    now = runtime.clock.now()
    async with runtime.uow() as uow:
        size, root = await uow.log.head()
        last = await uow.log.latest_checkpoint(runtime.node_public)
        if not force and (size == 0 or (last is not None and last.size >= size)):
            return None
        signed = sign_checkpoint(runtime.net, size, root, format_ts(now), runtime.node_key)
        record = await uow.log.add_checkpoint(
            CheckpointRecord(
                id=None,
                size=size,
                root=root,
                ts=parse_ts(signed.ts),
                signer=signed.signer,
                signature=signed.signature,
                body=checkpoint_bytes(signed.body).decode("utf-8"),
            )
        )
        staged = uow.outbox.stage(ev.LOG_CHECKPOINT, _payload(record), now)
        await uow.commit()
    await runtime.publish([staged.sequenced().message()])
    return record


async def latest(runtime: Runtime) -> CheckpointRecord | None:
    """The newest checkpoint (largest tree) of any node."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.log.latest_checkpoint()


async def page(
    runtime: Runtime, *, after_id: int = 0, limit: int = 50, newest_first: bool = False,
    before_id: int | None = None,
) -> list[CheckpointRecord]:  # fmt: skip
    """Checkpoints after `after_id`, oldest first (for connections); `newest_first`: those
    below `before_id`, newest first (to page backward)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.log.checkpoints(
            after_id=after_id, limit=limit, newest_first=newest_first, before_id=before_id
        )


async def count(runtime: Runtime) -> int:
    """How many checkpoints are kept (the connection's lazy `totalCount`)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.log.checkpoint_count()


class Checkpointer:
    """Runs `checkpoint` every `settings.checkpoint_interval` seconds until stopped."""

    def __init__(self, runtime: Runtime, interval: float | None = None) -> None:
        self.runtime = runtime
        self.interval = interval if interval is not None else runtime.settings.checkpoint_interval
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    def start(self) -> None:
        """Start the loop in a background task (idempotent)."""
        if self._task is not None and not self._task.done():
            return
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="stateward-checkpointer")

    async def stop(self) -> None:
        """Stop the loop (a checkpoint being signed finishes first)."""
        self._stopping.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                await asyncio.wait_for(task, timeout=30.0)
            except TimeoutError:
                task.cancel()

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=self.interval)
            try:
                await checkpoint(self.runtime)
            except Exception:  # never let the loop die
                log.exception("checkpoint failed")
