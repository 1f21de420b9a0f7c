"""A broadcaster backend over Redis pub/sub that reports a lost connection.

broadcaster's own Redis backend lets redis-py silently reconnect (messages published in
the gap are lost and nobody knows) or lets its listener task die unnoticed. Here the
subscribing connection has retries disabled and a named client; when it fails,
`next_published()` raises and `failed` is set, so the EventBus can re-subscribe and run
its catch-up callback. Publishing goes through a normal pooled client (with retries).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from broadcaster import BroadcastBackend, Event
from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

POLL_SECONDS = 1.0


class RedisPubSubBackend(BroadcastBackend):
    """Redis pub/sub for broadcaster: one subscribing connection, one publishing pool."""

    def __init__(self, url: str, *, client_name: str = "stateward-bus") -> None:
        self._url = url
        self.client_name = client_name
        self.failed = asyncio.Event()
        self._queue: asyncio.Queue[Event | BaseException] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        """Open the publishing pool and the (retry-less) subscribing connection."""
        self._publisher = aioredis.Redis.from_url(self._url)
        self._subscriber = aioredis.Redis.from_url(
            self._url,
            retry=Retry(NoBackoff(), 0),
            client_name=self.client_name,
            socket_keepalive=True,
        )
        self._pubsub = self._subscriber.pubsub(ignore_subscribe_messages=True)
        await self._pubsub.connect()

    async def disconnect(self) -> None:
        """Stop reading and close both connections (errors while closing are ignored)."""
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        for closer in (self._pubsub.aclose, self._subscriber.aclose, self._publisher.aclose):
            with contextlib.suppress(Exception):
                await closer()

    async def subscribe(self, channel: str) -> None:
        """SUBSCRIBE and start the reader on first use."""
        await self._pubsub.subscribe(channel)
        if self._reader is None:
            self._reader = asyncio.create_task(self._read(), name="redis-bus-reader")

    async def unsubscribe(self, channel: str) -> None:
        """UNSUBSCRIBE (ignored once the connection is gone)."""
        if not self.failed.is_set():
            await self._pubsub.unsubscribe(channel)

    async def publish(self, channel: str, message: Any) -> None:
        """PUBLISH through the pooled client."""
        await self._publisher.publish(channel, message)

    async def next_published(self) -> Event:
        """The next message; raises the connection error once the subscription is lost."""
        item = await self._queue.get()
        if isinstance(item, BaseException):
            self._queue.put_nowait(item)
            raise item
        return item

    async def _read(self) -> None:
        try:
            while True:
                message = await self._pubsub.get_message(timeout=POLL_SECONDS)
                if message is not None and message["type"] == "message":
                    channel = message["channel"]
                    data = message["data"]
                    self._queue.put_nowait(
                        Event(
                            channel=channel.decode() if isinstance(channel, bytes) else channel,
                            message=data.decode() if isinstance(data, bytes) else data,
                        )
                    )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._queue.put_nowait(exc)
            self.failed.set()
