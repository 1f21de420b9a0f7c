"""A broadcaster backend over PostgreSQL LISTEN/NOTIFY that survives concurrency and outages.

broadcaster's own postgres backend shares one connection between LISTEN and publishing
(concurrent publishes fail with "another operation is in progress") and never notices a
dropped connection. Here: a dedicated LISTEN connection (watched by a termination
listener and a periodic ping) and a small asyncpg pool for `pg_notify`. NOTIFY payloads
must stay under 8000 bytes; larger ones are refused before reaching the server.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import asyncpg
from broadcaster import BroadcastBackend, Event

MAX_NOTIFY_BYTES = 7999
PING_SECONDS = 5.0


class NotifyPayloadTooLarge(ValueError):
    """A message does not fit in one PostgreSQL NOTIFY (8000 bytes)."""


def asyncpg_dsn(url: str) -> str:
    """`postgresql+asyncpg://` / `postgres://` URLs as a DSN asyncpg accepts."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    base = scheme.split("+", 1)[0]
    if base not in ("postgres", "postgresql"):
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    return f"postgresql://{rest}"


class PostgresNotifyBackend(BroadcastBackend):
    """LISTEN on one dedicated connection, NOTIFY through a pool."""

    def __init__(self, url: str, *, pool_size: int = 4, ping_seconds: float = PING_SECONDS):
        self._dsn = asyncpg_dsn(url)
        self._pool_size = pool_size
        self._ping_seconds = ping_seconds
        self.failed = asyncio.Event()
        self._queue: asyncio.Queue[Event | BaseException] = asyncio.Queue()
        self._pinger: asyncio.Task[None] | None = None
        self._pool: asyncpg.Pool | None = None
        self._listen: asyncpg.Connection | None = None

    @property
    def listen_pid(self) -> int:
        """Backend pid of the LISTEN connection (tests terminate it to simulate an outage)."""
        assert self._listen is not None
        return int(self._listen.get_server_pid())

    async def connect(self) -> None:
        """Open the publishing pool and the LISTEN connection."""
        self._pool = await asyncpg.create_pool(self._dsn, min_size=1, max_size=self._pool_size)
        self._listen = await asyncpg.connect(self._dsn)
        self._listen.add_termination_listener(self._on_terminated)
        self._pinger = asyncio.create_task(self._ping(), name="pg-bus-ping")

    async def disconnect(self) -> None:
        """Close the LISTEN connection and the pool (errors while closing are ignored)."""
        if self._pinger is not None:
            self._pinger.cancel()
            with contextlib.suppress(BaseException):
                await self._pinger
        if self._listen is not None:
            self._listen.remove_termination_listener(self._on_terminated)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._listen.close(), timeout=2)
        if self._pool is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._pool.close(), timeout=2)

    async def subscribe(self, channel: str) -> None:
        """LISTEN on `channel` (asyncpg quotes the identifier)."""
        assert self._listen is not None
        await self._listen.add_listener(channel, self._on_notify)

    async def unsubscribe(self, channel: str) -> None:
        """UNLISTEN (ignored once the connection is gone)."""
        if self._listen is not None and not self._listen.is_closed():
            await self._listen.remove_listener(channel, self._on_notify)

    async def publish(self, channel: str, message: Any) -> None:
        """`pg_notify` through the pool; refuses payloads of 8000 bytes or more."""
        text = message if isinstance(message, str) else str(message)
        size = len(text.encode())
        if size > MAX_NOTIFY_BYTES:
            raise NotifyPayloadTooLarge(f"NOTIFY payload is {size} bytes; the limit is 7999")
        assert self._pool is not None
        await self._pool.execute("SELECT pg_notify($1, $2)", channel, text)

    async def next_published(self) -> Event:
        """The next notification; raises once the LISTEN connection is lost."""
        item = await self._queue.get()
        if isinstance(item, BaseException):
            self._queue.put_nowait(item)
            raise item
        return item

    def _on_notify(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        self._queue.put_nowait(Event(channel=channel, message=payload))

    def _on_terminated(self, connection: Any) -> None:
        self._fail(ConnectionError("PostgreSQL LISTEN connection was terminated"))

    def _fail(self, exc: BaseException) -> None:
        if not self.failed.is_set():
            self.failed.set()
            self._queue.put_nowait(exc)

    async def _ping(self) -> None:
        assert self._listen is not None
        try:
            while True:
                await asyncio.sleep(self._ping_seconds)
                await asyncio.wait_for(self._listen.fetchval("SELECT 1"), timeout=5)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fail(exc)
