"""The outbox relay: committed outbox rows -> the bus -> this node's subscribers, in order.

Three duties, one object per node (`OutboxRelay(runtime, bus)`):

- **Publish after commit.** It registers itself as a `runtime` publisher: the committed
  §9 messages go to `bus.publish`; their ids are marked published in the background, a
  batch at a time (one small transaction per `flush_interval`, not one per event).
- **Sweep.** Every `sweep_interval` it republishes rows still unpublished `grace` seconds
  after they were written (the node that wrote them crashed between commit and publish,
  or its bus was down). Republishing is safe: delivery dedupes by id.
- **Sequence.** It sits between the bus reader and the local fan-out (`bus.on_message`):
  messages reach local subscribers in cursor order, each id once. A message whose id is
  not the next one (another node published later ids first, a publish was lost, the bus
  was down) makes the relay read the missing rows from the outbox and deliver them first.
  Outbox ids grow in commit order, so once id N is visible every smaller id is final.
  After a bus reconnect it delivers every row after its cursor (`catch_up`), and while
  the bus is down it does the same every `outage_poll` seconds, so this node's live
  subscribers keep receiving every committed row (read from the outbox) through a bus
  outage instead of stalling until it ends (issue 11).
  A (re)started node begins below the oldest row still unpublished, not at the head: the
  rows a crashed node committed but never published are delivered to this node's live
  subscribers when the sweep republishes them (or the next id arrives), not dropped as
  already seen.

Decoding, gap filling and ordering are done once per event per node, never per subscriber.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from stateward.observe import metrics
from stateward.persistence import UnitOfWorkFactory
from stateward.persistence.outbox import HANDOFF_KEY
from stateward.subscriptions.bus import BusUnavailable, EventBus, MessageTooLarge
from stateward.subscriptions.fanout import Payload

log = logging.getLogger(__name__)

_HEAD = object()  # sequencer request: deliver every committed row after the cursor


def cursor_of(payload: Payload) -> int | None:
    """The outbox id of a bus message (its subscription cursor), or None if it has none."""
    value = payload.get("id")
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class _Clock(Protocol):
    def now(self) -> datetime: ...


class Runtime(Protocol):
    """What the relay needs of a `stateward.runtime.core.services.Runtime` (structural, so
    this layer never imports the runtime above it): units of work, the after-commit
    publishers it joins, and the clock."""

    @property
    def uow(self) -> UnitOfWorkFactory: ...

    @property
    def publishers(self) -> list[Callable[[Sequence[dict[str, Any]]], Awaitable[None]]]: ...

    @property
    def clock(self) -> _Clock: ...


class OutboxRelay:
    """Publishes, sweeps and sequences outbox rows for one node (see the module docstring)."""

    def __init__(
        self,
        runtime: Runtime,
        bus: EventBus,
        *,
        sweep_interval: float = 2.0,
        grace: float = 5.0,
        flush_interval: float = 1.0,
        batch: int = 500,
        outage_poll: float = 1.0,
    ) -> None:
        self.runtime = runtime
        self.bus = bus
        self.sweep_interval = sweep_interval
        self.grace = grace
        self.flush_interval = flush_interval
        self.batch = batch
        self.outage_poll = outage_poll
        self.cursor = 0  # highest id handed to local subscribers
        self.filled = 0  # rows delivered from the outbox rather than the bus
        self.republished = 0
        self._to_mark: list[int] = []
        self._floor = 0  # every unpublished-row id <= floor is known published
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._busy = False
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Read the current head, hook into the runtime and the bus, start the loops.

        Call before `bus.start()` so no message of this node's lifetime bypasses it.
        """
        async with self.runtime.uow(readonly=True) as uow:
            head = await uow.outbox.last_id()
            oldest = await uow.outbox.unpublished(after_id=0, limit=1)
        self.cursor = oldest[0].id - 1 if oldest else head
        if self.publish not in self.runtime.publishers:
            self.runtime.publishers.append(self.publish)
        self.bus.on_message = self.receive
        if self.bus.on_reconnect is None:
            self.bus.on_reconnect = self.catch_up
        self._tasks = [
            asyncio.create_task(self._sequence(), name="relay-sequencer"),
            asyncio.create_task(self._every(self.flush_interval, self.flush), name="relay-flush"),
            asyncio.create_task(self._every(self.sweep_interval, self.sweep), name="relay-sweep"),
            asyncio.create_task(
                self._every(self.outage_poll, self.poll_during_outage), name="relay-outage-poll"
            ),
        ]

    async def stop(self) -> None:
        """Stop the loops, unhook, and record what was published so far."""
        with contextlib.suppress(ValueError):
            self.runtime.publishers.remove(self.publish)
        if self.bus.on_message == self.receive:
            self.bus.on_message = None
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            await self.flush()

    # -- publishing -------------------------------------------------------------------

    async def publish(self, messages: Sequence[dict[str, Any]]) -> None:
        """The runtime's after-commit hook: send each message, remember it for marking.

        A bus outage leaves the rest unpublished (the sweep retries them later); a
        message too large for the bus is logged and marked (subscribers still get it,
        read from the outbox when the next id arrives).
        """
        for message in messages:
            try:
                await self.bus.publish(message)
            except BusUnavailable:
                return
            except MessageTooLarge:
                log.error("outbox row %s is too large for the bus", message.get("id"))
            cid = cursor_of(message)
            if cid is not None:
                self._to_mark.append(cid)

    async def flush(self) -> int:
        """Mark the published ids collected since the last flush (one transaction)."""
        ids, self._to_mark = self._to_mark, []
        if not ids:
            return 0
        try:
            async with self.runtime.uow() as uow:
                count = await uow.outbox.mark_published(ids, self.runtime.clock.now())
                await uow.commit()
        except Exception:
            self._to_mark[:0] = ids  # keep them for the next flush
            raise
        return count

    async def sweep(self) -> int:
        """Republish rows left unpublished for `grace` seconds; returns how many."""
        if not self.bus.connected:
            return 0
        cutoff = self.runtime.clock.now() - timedelta(seconds=self.grace)
        pending = set(self._to_mark)
        async with self.runtime.uow(readonly=True) as uow:
            head = await uow.outbox.last_id()
            # ids and times first: only the stale rows' payloads are read and decoded (the
            # others are nearly all published and about to be marked: under write load
            # decoding them was ~3 % of the event loop, docs/performance.md `loop18`)
            marks = await uow.outbox.unpublished_marks(after_id=self._floor, limit=self.batch)
            old = [i for i, created in marks if created <= cutoff and i not in pending]
            stale = await uow.outbox.by_ids(old)
            handoff = int(await uow.meta.get(HANDOFF_KEY) or 0) if marks else 0
        stale_ids = {r.id for r in stale}
        waiting = [i for i, _ in marks if i not in stale_ids]
        sent: list[int] = []
        for row in stale:
            try:
                await self.bus.publish(row.message())
            except BusUnavailable:
                break
            except MessageTooLarge:
                log.error("outbox row %s is too large for the bus", row.id)
            sent.append(row.id)
        if sent:
            async with self.runtime.uow() as uow:
                await uow.outbox.mark_published(sent, self.runtime.clock.now())
                await uow.commit()
            metrics.record_published((r.created_at for r in stale if r.id in sent), "sweep")
            recovered = [i for i in sent if i > handoff]
            self.republished += len(recovered)
            metrics.record_republished(len(recovered))
            if recovered:
                log.info("relay republished %d outbox row(s) left unpublished", len(recovered))
            if len(recovered) < len(sent):
                log.debug(
                    "relay published %d row(s) of a tool without a bus", len(sent) - len(recovered)
                )
        unsent = waiting + [r.id for r in stale if r.id not in sent]
        if unsent:
            self._floor = max(self._floor, min(unsent) - 1)
        else:
            self._floor = max(self._floor, marks[-1][0] if len(marks) >= self.batch else head)
        return len(sent)

    # -- sequencing -------------------------------------------------------------------

    def receive(self, payload: Payload) -> None:
        """A decoded bus message (the bus's `on_message`): deliver now when it is the next
        id, drop it when already delivered, else hand it to the sequencer."""
        cid = cursor_of(payload)
        if cid is None:
            self.bus.deliver_local(payload)
            return
        if not self._busy and self._queue.empty():
            if cid <= self.cursor:
                return
            if cid == self.cursor + 1:
                self.cursor = cid
                self.bus.deliver_local(payload)
                return
        self._queue.put_nowait(payload)

    def catch_up(self) -> None:
        """After a bus reconnect: deliver every committed row after the cursor."""
        self._queue.put_nowait(_HEAD)

    async def poll_during_outage(self) -> None:
        """While the bus is disconnected, deliver the rows committed since the cursor (the
        sequencer reads them from the outbox); nothing when connected or already queued."""
        if not self.bus.connected and self._queue.empty() and not self._busy:
            self.catch_up()

    async def _sequence(self) -> None:
        while True:
            item = await self._queue.get()
            self._busy = True
            try:
                await self._retrying(item)
            finally:
                self._busy = False

    async def _retrying(self, item: Any) -> None:
        delay = 0.1
        while True:
            try:
                await self._handle(item)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("relay could not read the outbox; retrying")
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _handle(self, item: Any) -> None:
        if item is _HEAD:
            await self._fill(None)
            return
        cid = cursor_of(item)
        assert cid is not None
        if cid <= self.cursor:
            return
        if cid > self.cursor + 1:
            await self._fill(cid)
        self.cursor = cid
        self.bus.deliver_local(item)

    async def _fill(self, before: int | None) -> None:
        """Deliver committed rows after the cursor (and below `before` when given)."""
        start = self.cursor
        try:
            await self._fill_rows(before)
        finally:
            if self.cursor > start and before is None:
                log.info("relay caught up to cursor %d from the outbox", self.cursor)

    async def _fill_rows(self, before: int | None) -> None:
        while before is None or self.cursor < before - 1:
            async with self.runtime.uow(readonly=True) as uow:
                rows = await uow.outbox.events_after(self.cursor, limit=self.batch)
            rows = [r for r in rows if before is None or r.id < before]
            for row in rows:
                self.cursor = row.id
                self.filled += 1
                self.bus.deliver_local(row.message())
            if len(rows) < self.batch:
                return

    async def _every(self, seconds: float, work: Any) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await work()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("relay %s failed; will retry", getattr(work, "__name__", work))
