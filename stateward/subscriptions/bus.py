"""The node's event bus: broadcaster underneath, one bus subscription, bounded local fan-out.

`EventBus(url)` speaks `memory://` (one node), `redis://` and `postgres://` (many nodes).
Each node keeps exactly ONE subscription on one channel; every message is decoded once
and handed to local subscribers through bounded queues (`fanout.py`). When the bus
connection is lost, the reader reconnects with exponential backoff and then calls
`on_reconnect` so the outbox relay can catch up by cursor (messages sent while this node
was cut off never arrive over the bus; `deliver_local` lets the catch-up inject them).

    bus = EventBus(settings.bus_url, on_reconnect=relay.catch_up)
    await bus.start()
    sub = bus.subscribe(lambda p: p["namespace"] == "acme", maxsize=1000)
    async for payload in sub: ...
    await bus.publish({"id": "42", "type": "workflow.started", ...})
    await bus.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import random
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import orjson
from broadcaster import Broadcast, BroadcastBackend

from stateward.subscriptions.fanout import (
    DEFAULT_MAXSIZE,
    Fanout,
    Filter,
    LocalSubscription,
    Payload,
)
from stateward.subscriptions.postgres_backend import PostgresNotifyBackend
from stateward.subscriptions.redis_backend import RedisPubSubBackend

DEFAULT_CHANNEL = "stateward.events"
MAX_MESSAGE_BYTES = 7999  # PostgreSQL NOTIFY limit; §9 payloads stay under 4 KB anyway

log = logging.getLogger(__name__)

OnReconnect = Callable[[], Awaitable[None] | None]
#: Receives every decoded bus message instead of the fan-out (the relay's sequencer).
OnMessage = Callable[[Payload], None]


#: What the standard library wrote with `default=str` goes to `str` here too.
_AS_BEFORE = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def encode_payload(payload: Payload) -> bytes:
    """The bus text of a payload (UTF-8, compact): orjson, which writes plain JSON values
    exactly as `json.dumps(separators=(",", ":"), ensure_ascii=False, default=str)` did;
    datetimes still go through `str`, and whatever orjson refuses (integers past 64
    bits, keys that are not strings) through the standard library as before."""
    try:
        return orjson.dumps(payload, default=str, option=_AS_BEFORE)
    except TypeError:
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str)
        return text.encode()


class BusUnavailable(ConnectionError):
    """The bus is not connected (not started, stopped, or reconnecting)."""


class MessageTooLarge(ValueError):
    """A payload whose JSON form exceeds MAX_MESSAGE_BYTES."""


@dataclass
class _Epoch:
    """One connection's worth of broadcaster state, torn down as a whole on failure."""

    broadcast: Broadcast
    backend: BroadcastBackend | None
    stack: AsyncExitStack
    subscriber: Any


def make_backend(url: str, *, client_name: str = "stateward-bus") -> BroadcastBackend | None:
    """Our backend for `url` (redis/postgres), or None to let broadcaster handle memory://."""
    scheme = urlparse(url).scheme.split("+", 1)[0]
    if scheme in ("redis", "rediss"):
        return RedisPubSubBackend(url, client_name=client_name)
    if scheme in ("postgres", "postgresql"):
        return PostgresNotifyBackend(url)
    if scheme == "memory":
        return None
    raise ValueError(f"unsupported bus URL {url!r}: use memory://, redis:// or postgres://")


class EventBus:
    """Publish §9 payloads and deliver them to this node's local subscribers."""

    def __init__(
        self,
        url: str = "memory://",
        *,
        channel: str = DEFAULT_CHANNEL,
        on_reconnect: OnReconnect | None = None,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        client_name: str = "stateward-bus",
        on_message: OnMessage | None = None,
    ) -> None:
        make_backend(url)  # validate the URL now, not at start()
        self.url = url
        self.channel = channel
        self.on_reconnect = on_reconnect
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.client_name = client_name
        #: When set, decoded messages go here (which re-injects them with `deliver_local`,
        #: e.g. in cursor order) instead of straight to the local fan-out.
        self.on_message = on_message
        self.fanout = Fanout()
        self.reconnects = 0
        self.decoded = 0
        self._epoch: _Epoch | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        """True while a bus subscription is live (for readiness checks)."""
        return self._epoch is not None

    @property
    def backend(self) -> BroadcastBackend | None:
        """The current connection's backend (None for memory:// or while disconnected)."""
        return self._epoch.backend if self._epoch else None

    async def start(self) -> None:
        """Connect and subscribe once (raising if the bus is unreachable), then keep reading."""
        if self._reader is not None:
            return
        self._epoch = await self._connect()
        self._reader = asyncio.create_task(self._run(), name=f"bus-reader:{self.channel}")

    async def stop(self) -> None:
        """Stop reading, end every local subscription (BUS_STOPPED) and disconnect."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        self.fanout.close_all()
        epoch, self._epoch = self._epoch, None
        if epoch is not None:
            await _teardown(epoch)

    async def publish(self, payload: Payload) -> None:
        """Send one payload to every node (this one included) on the bus channel.

        Raises MessageTooLarge for payloads over MAX_MESSAGE_BYTES and BusUnavailable
        while disconnected; the outbox keeps the row and the relay retries.
        """
        data = encode_payload(payload)
        size = len(data)
        text = data.decode()
        if size > MAX_MESSAGE_BYTES:
            raise MessageTooLarge(f"bus message is {size} bytes; limit {MAX_MESSAGE_BYTES}")
        epoch = self._epoch
        if epoch is None:
            raise BusUnavailable("event bus is not connected")
        await epoch.broadcast.publish(self.channel, text)

    def subscribe(
        self, filter_fn: Filter | None = None, maxsize: int = DEFAULT_MAXSIZE
    ) -> LocalSubscription:
        """A local subscription to payloads matching `filter_fn`, queue bounded by `maxsize`."""
        return self.fanout.subscribe(filter_fn, maxsize)

    def deliver_local(self, payload: Payload) -> None:
        """Hand a payload to local subscribers only (catch-up after a reconnect)."""
        self.fanout.dispatch(payload)

    async def _connect(self) -> _Epoch:
        backend = make_backend(self.url, client_name=self.client_name)
        broadcast = Broadcast(backend=backend) if backend else Broadcast(self.url)
        await broadcast.connect()
        stack = AsyncExitStack()
        try:
            subscriber = await stack.enter_async_context(broadcast.subscribe(self.channel))
        except BaseException:
            await _teardown(_Epoch(broadcast, backend, stack, None))
            raise
        return _Epoch(broadcast, backend, stack, subscriber)

    async def _run(self) -> None:
        while True:
            epoch = self._epoch
            assert epoch is not None
            try:
                await self._pump(epoch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("event bus connection lost (%s: %s)", type(exc).__name__, exc)
            self._epoch = None
            await _teardown(epoch)
            self._epoch = await self._reconnect()
            self.reconnects += 1
            await self._notify_reconnected()

    async def _pump(self, epoch: _Epoch) -> None:
        """Dispatch messages until the subscription ends or the backend reports failure."""
        consume = asyncio.create_task(self._consume(epoch.subscriber))
        waiters: set[asyncio.Task[Any]] = {consume}
        failed = getattr(epoch.backend, "failed", None)
        if isinstance(failed, asyncio.Event):
            waiters.add(asyncio.create_task(failed.wait()))
        try:
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waiters:
                task.cancel()
            for task in waiters:
                with contextlib.suppress(BaseException):
                    await task
        if consume in done and consume.exception() is not None:
            raise consume.exception()  # type: ignore[misc]
        raise BusUnavailable("event bus subscription ended")

    async def _consume(self, subscriber: Any) -> None:
        async for event in subscriber:
            self._dispatch(event.message)

    def _dispatch(self, text: str) -> None:
        """Decode ONCE per message per node, then fan out the same dict to everyone."""
        try:
            payload = orjson.loads(text)
        except orjson.JSONDecodeError:
            try:
                payload = json.loads(text)  # NaN and the like, from an older node
            except (TypeError, ValueError):
                log.warning("dropping undecodable bus message: %.80r", text)
                return
        except TypeError:
            log.warning("dropping undecodable bus message: %.80r", text)
            return
        if not isinstance(payload, dict):
            log.warning("dropping non-object bus message: %.80r", text)
            return
        self.decoded += 1
        if self.on_message is not None:
            self.on_message(payload)
        else:
            self.fanout.dispatch(payload)

    async def _reconnect(self) -> _Epoch:
        delay = self.backoff_initial
        while True:
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            try:
                epoch = await self._connect()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("event bus reconnect failed (%s); retrying", exc)
                delay = min(delay * 2, self.backoff_max)
                continue
            log.info("event bus re-subscribed to %s", self.channel)
            return epoch

    async def _notify_reconnected(self) -> None:
        if self.on_reconnect is None:
            return
        try:
            outcome = self.on_reconnect()
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            log.exception("on_reconnect callback failed")


async def _teardown(epoch: _Epoch) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(epoch.stack.aclose(), timeout=2)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(epoch.broadcast.disconnect(), timeout=2)
    if epoch.backend is not None:  # broadcaster skips this when its listener task failed
        with contextlib.suppress(Exception):
            await asyncio.wait_for(epoch.backend.disconnect(), timeout=2)
