"""Local fan-out: one decoded bus message -> every matching local subscriber, bounded.

Each subscriber has its own bounded queue. Delivery never waits: a subscriber whose queue
is full is dropped at once with reason SLOW_CONSUMER (its buffered items are discarded),
so one stalled dashboard cannot make the node's memory grow or hold up the others. The
subscriber then resumes with `after: <cursor>` from the outbox.

A subscriber may also take a payload at once, in the dispatching loop, without its task
waking up (`LocalSubscription.take_now`, issue 18): only while its consumer is idle —
waiting for the next payload with nothing queued — so every earlier payload is already
handled and order is kept; whatever the hook declines is queued as usual.
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
#: Handles a payload at once in the dispatching loop (True), or declines (False: queue it).
TakeNow = Callable[[Payload], bool]

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
        #: Handled at once by `take_now` rather than queued (a metrics figure).
        self.taken_now = 0
        self._take_now: TakeNow | None = None
        self._idle = False  # the consumer waits in `__anext__` with nothing queued

    def take_now(self, hook: TakeNow | None) -> None:
        """Let `hook` handle a matching payload in the dispatching loop itself while the
        consumer is idle (waiting, nothing queued): True means handled (sent, or rightly
        skipped), False means queue it as usual. The consumer's own checks must be the
        hook's: it stands in for the consumer's next step, never for a different one.
        None removes the hook."""
        self._take_now = hook

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
        hook = self._take_now
        if hook is not None and self._idle and self._queue.empty():
            try:
                if hook(payload):
                    self.taken_now += 1
                    return
            except Exception:  # the consumer's own path will meet (and report) it
                log.exception("subscription take_now failed; queueing the payload")
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
        self._take_now = None
        self.closed_reason = reason
        self._fanout.discard(self)
        while not self._queue.empty():  # free buffered payloads now
            self._queue.get_nowait()
        self._queue.put_nowait(_END)

    def __aiter__(self) -> AsyncIterator[Payload]:
        return self

    async def __anext__(self) -> Payload:
        """The next matching payload, in bus order."""
        queue = self._queue
        if queue.empty():
            self._idle = True
            try:
                item = await queue.get()
            finally:
                self._idle = False
        else:
            item = queue.get_nowait()
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
