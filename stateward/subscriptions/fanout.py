"""Local fan-out: one decoded bus message -> every matching local subscriber, bounded.

Each subscriber has its own bounded queue. Delivery never waits: a subscriber whose queue
is full is dropped at once with reason SLOW_CONSUMER (its buffered items are discarded),
so one stalled dashboard cannot make the node's memory grow or hold up the others. The
subscriber then resumes with `after: <cursor>` from the outbox.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from stateward.domain.errors import DomainError

SLOW_CONSUMER = "SLOW_CONSUMER"
BUS_STOPPED = "BUS_STOPPED"
DEFAULT_MAXSIZE = 1000

Payload = Mapping[str, Any]
Filter = Callable[[Payload], bool]

log = logging.getLogger(__name__)


class SubscriptionClosed(DomainError):
    """The node ended a live subscription (too slow, or shutting down); resume by cursor."""


_END = object()


class LocalSubscription:
    """One consumer's view of the bus: an async iterator of payload dicts.

    Iteration ends normally after `close()`; it raises `SubscriptionClosed` (code
    SLOW_CONSUMER or BUS_STOPPED, see `closed_reason`) when the node ended it.
    Payloads are shared between subscribers: treat them as read-only.
    """

    def __init__(self, fanout: Fanout, filter_fn: Filter, maxsize: int) -> None:
        if maxsize <= 0:
            raise ValueError("maxsize must be positive")
        self._fanout = fanout
        self._filter = filter_fn
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=maxsize)
        self.closed = False
        self.closed_reason: str | None = None
        self.delivered = 0

    def offer(self, payload: Payload) -> None:
        """Queue `payload` if it matches the filter; drop the subscriber if its queue is full."""
        if self.closed:
            return
        try:
            wanted = self._filter(payload)
        except Exception:  # a broken filter must not break the node's reader
            log.exception("subscription filter failed; dropping subscriber")
            self._end("FILTER_FAILED")
            return
        if not wanted:
            return
        try:
            self._queue.put_nowait(payload)
        except asyncio.QueueFull:
            self._end(SLOW_CONSUMER)

    def close(self) -> None:
        """End the subscription from the consumer's side (iteration stops normally)."""
        self._end(None)

    def _end(self, reason: str | None) -> None:
        if self.closed:
            return
        self.closed = True
        self.closed_reason = reason
        self._fanout.discard(self)
        while not self._queue.empty():  # free buffered payloads now
            self._queue.get_nowait()
        self._queue.put_nowait(_END)

    def __aiter__(self) -> AsyncIterator[Payload]:
        return self

    async def __anext__(self) -> Payload:
        """The next matching payload, in bus order."""
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)  # keep later calls ending too
            if self.closed_reason is None:
                raise StopAsyncIteration
            raise SubscriptionClosed(self.closed_reason, _MESSAGES.get(self.closed_reason, ""))
        self.delivered += 1
        return item  # type: ignore[no-any-return]

    @property
    def pending(self) -> int:
        """How many payloads wait in this subscriber's queue."""
        return self._queue.qsize()


_MESSAGES = {
    SLOW_CONSUMER: "subscriber fell too far behind; resubscribe with `after` the last cursor",
    BUS_STOPPED: "this node is shutting down; reconnect and resubscribe with `after`",
    "FILTER_FAILED": "the subscription filter raised; resubscribe",
}


class Fanout:
    """The set of local subscribers of one node, fed by the node's single bus reader."""

    def __init__(self) -> None:
        self._subscribers: set[LocalSubscription] = set()

    def subscribe(
        self, filter_fn: Filter | None = None, maxsize: int = DEFAULT_MAXSIZE
    ) -> LocalSubscription:
        """Register a subscriber receiving payloads for which `filter_fn` is true."""
        sub = LocalSubscription(self, filter_fn or _all, maxsize)
        self._subscribers.add(sub)
        return sub

    def dispatch(self, payload: Payload) -> None:
        """Offer one already-decoded payload to every subscriber (never blocks)."""
        for sub in list(self._subscribers):
            sub.offer(payload)

    def discard(self, sub: LocalSubscription) -> None:
        """Forget a subscriber (called when it closes)."""
        self._subscribers.discard(sub)

    def close_all(self, reason: str = BUS_STOPPED) -> None:
        """End every subscriber with `reason` (node shutdown)."""
        for sub in list(self._subscribers):
            sub._end(reason)

    def __len__(self) -> int:
        return len(self._subscribers)

    def pending(self) -> int:
        """Payloads waiting in all subscriber queues (a metrics gauge)."""
        return sum(sub.pending for sub in self._subscribers)


def _all(_: Payload) -> bool:
    return True
