"""The node's services: everything `stateward serve` runs, built from `Settings`.

`create_services(settings)` is what `stateward.app.create_app` loads by default. The
returned `Services` object is the composition root of a node (it wires the runtime, the
event bus, the outbox relay, the hook sandbox and the periodic ticker), and it is what
resolvers read as `info.context.services`: `.runtime`, `.bus`, `.relay`, `.hooks`; the
app also calls its `authenticate(token)` and `ready()`. (The request's DataLoaders are
built by the GraphQL layer from `.runtime`: `stateward.http.context.create_loaders`.)

`start()` opens the database (running the migrations), makes sure the deployment has a
system registry (on a fresh database it creates the genesis for an operator key file, see
`operator_key_path`), then starts the relay, the bus, the hook automation and the ticker.
`stop()` undoes it in reverse order. `ready()` pings the database and the bus;
`authenticate(token)` resolves bearer tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

from stateward.domain.paths import SYSTEM_NAMESPACE, registry_id
from stateward.governance.keys import generate_keypair, read_key_file, write_key_file
from stateward.observe import tracing
from stateward.persistence import sqlite_file
from stateward.runtime.access import genesis
from stateward.runtime.access.auth import Viewer, authenticate
from stateward.runtime.core.services import Runtime
from stateward.runtime.hooks.runner import HookRunner
from stateward.settings import Settings
from stateward.subscriptions.bus import DEFAULT_CHANNEL, EventBus
from stateward.subscriptions.relay import OutboxRelay

log = logging.getLogger(__name__)

OPERATOR_KEY_ENV = "STATEWARD_OPERATOR_KEY_FILE"
BUS_CHANNEL_ENV = "STATEWARD_BUS_CHANNEL"
GROUP_COMMIT_ENV = "STATEWARD_GROUP_COMMIT"
OPERATOR_FILE = "stateward-operator.json"
READY_TIMEOUT = 1.5
#: How long a resolved bearer token is trusted without reading it again (seconds).
VIEWER_TTL = 1.0
VIEWER_CACHE_LIMIT = 10_000


def operator_key_path(settings: Settings) -> Path:
    """Where a fresh deployment's operator key lives (created by `serve` if missing).

    `settings.extra["operator_key_file"]` or `$STATEWARD_OPERATOR_KEY_FILE` when set;
    beside a SQLite file `<name>.db` as `<name>-operator.json` (so the default
    `./stateward.db` gets `./stateward-operator.json`); else `./stateward-operator.json`.
    """
    explicit = (settings.extra or {}).get("operator_key_file") or os.environ.get(OPERATOR_KEY_ENV)
    if explicit:
        return Path(str(explicit))
    db = sqlite_file(settings.database_url)
    if db is not None:
        return db.with_name(f"{db.stem}-operator.json")
    return Path(OPERATOR_FILE)


def bus_channel(settings: Settings) -> str:
    """The bus channel: `settings.extra["bus_channel"]`, `$STATEWARD_BUS_CHANNEL` or the
    default (nodes of one deployment must agree; tests isolate themselves with it)."""
    value = (settings.extra or {}).get("bus_channel") or os.environ.get(BUS_CHANNEL_ENV)
    return str(value) if value else DEFAULT_CHANNEL


def group_commit(settings: Settings) -> bool | None:
    """Whether `act` hands events to the single group-commit writer (`runtime.group`):
    `settings.extra["group_commit"]` or `$STATEWARD_GROUP_COMMIT` (1/0); None when unset
    (the runtime's default, on: concurrent SQLite writers otherwise wait in SQLite's busy
    handler, with seconds of tail latency)."""
    value = (settings.extra or {}).get("group_commit", os.environ.get(GROUP_COMMIT_ENV))
    if value is None or value == "":
        return None
    return str(value).lower() in ("1", "true", "yes", "on")


@dataclass
class Bootstrap:
    """What `start()` found or did about the deployment's genesis."""

    created: bool = False
    operator_key_file: Path | None = None
    operator: str | None = None


class Services:
    """One node's running parts (see the module docstring).

    Tests may hand in an opened `runtime` (not closed by `stop()`) and a `bus`; with an
    injected runtime the genesis, hook automation and ticker stay off unless asked for
    (`genesis=True`, `background=True`), so a test controls its clock and its database.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        runtime: Runtime | None = None,
        bus: EventBus | None = None,
        hooks: HookRunner | None = None,
        relay_options: dict[str, Any] | None = None,
        genesis: bool | None = None,
        background: bool | None = None,
    ) -> None:
        self.settings = settings
        self._runtime = runtime
        self._owns_runtime = runtime is None
        if bus is None:
            channel = bus_channel(settings)
            bus = EventBus(settings.bus_url, channel=channel, client_name=f"sw-bus:{channel}")
        self.bus = bus
        self.hooks = hooks or HookRunner.from_settings(settings)
        self.relay_options = relay_options or {}
        self.relay: OutboxRelay | None = None
        self.bootstrap = Bootstrap()
        self.genesis = self._owns_runtime if genesis is None else genesis
        self.background = self._owns_runtime if background is None else background
        self.started = False
        self.viewers: dict[str, tuple[float, Viewer]] = {}
        #: Reads of a token's viewer under way (shared by concurrent requests).
        self._viewer_reads: dict[str, asyncio.Future[Viewer | None]] = {}
        #: Raised whenever the viewer cache is dropped (reads begun before are not kept).
        self._viewer_epoch = 0
        self._stops: list[Callable[[], Awaitable[Any]]] = []

    @property
    def runtime(self) -> Runtime:
        """The node's runtime (available once started, or when injected)."""
        if self._runtime is None:
            raise RuntimeError("services are not started")
        return self._runtime

    async def start(self) -> None:
        """Open the database, ensure the genesis, start relay, bus, automation and ticker."""
        if self.started:
            return
        try:
            if self._runtime is None:
                self._runtime = await Runtime.open(self.settings)
                tracing.instrument_engine(self._runtime.engine, sql=self.settings.trace_sql)
                wanted = group_commit(self.settings)
                if wanted is not None:
                    self._runtime.group_commit = wanted
                self._stops.append(self._close_runtime)
            self._stops.append(self.hooks.close)
            self._stops.append(self._watch_grants(self._runtime))
            self._stops.append(_share_rate_limit(self._runtime, self.settings))
            self._stops.append(_release_revoked_claims(self._runtime))
            self.relay = OutboxRelay(self._runtime, self.bus, **self.relay_options)
            await self.relay.start()
            self._stops.append(self.relay.stop)
            await self.bus.start()
            self._stops.append(self.bus.stop)
            if self.genesis:
                key_file = operator_key_path(self.settings)
                self.bootstrap = await ensure_genesis(self._runtime, key_file)
            if self.background:
                self._stops.append(_start_automation(self._runtime, self.hooks))
                self._stops.append(_start_delivery(self._runtime))
                self._stops.append(_start_batches(self._runtime))
                self._stops.append(_start_ticker(self._runtime))
                self._stops.append(_start_checkpointer(self._runtime))
        except BaseException:
            await self.stop()
            raise
        self.started = True

    async def stop(self) -> None:
        """Stop everything `start()` started, newest first (errors are logged)."""
        self.started = False
        stops, self._stops = self._stops, []
        for stop in reversed(stops):
            try:
                await stop()
            except Exception:
                log.exception("error while stopping %s", getattr(stop, "__qualname__", stop))

    async def _close_runtime(self) -> None:
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            await runtime.close()

    async def ready(self) -> dict[str, bool]:
        """Readiness checks: the database answers and the bus subscription is live."""
        return {"database": await self._ping(), "bus": self.bus.connected}

    async def _ping(self) -> bool:
        if self._runtime is None:
            return False
        try:
            async with asyncio.timeout(READY_TIMEOUT), self._runtime.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception:
            return False
        return True

    def forget_viewers(self) -> None:
        """Drop every cached viewer (a token of this node was revoked: it stops at once
        here, on other nodes within `VIEWER_TTL`); a read already under way is not kept."""
        self.viewers.clear()
        self._viewer_epoch += 1

    async def authenticate(self, token: str) -> Viewer | None:
        """The viewer a bearer token stands for (None: unknown, expired or revoked).

        A resolved viewer is reused for `VIEWER_TTL` seconds (one read transaction less per
        request); grants changed on this node drop the cache at once, other nodes' changes
        and key revocations apply within the TTL. Refused tokens are never cached.
        Concurrent requests of one token whose entry expired share ONE read (with 16
        requests in flight each expiry cost 16 read transactions); a read that began
        before the cache was dropped answers its waiters but is not kept.
        """
        now = time.monotonic()
        hit = self.viewers.get(token)
        if hit is not None and hit[0] > now:
            viewer = hit[1]
            if viewer.expires_at is None or viewer.expires_at > self.runtime.clock.now():
                return viewer
        pending = self._viewer_reads.get(token)
        if pending is None:
            pending = asyncio.ensure_future(self._read_viewer(token, now, self._viewer_epoch))
            self._viewer_reads[token] = pending
            pending.add_done_callback(lambda _: self._viewer_reads.pop(token, None))
        return await asyncio.shield(pending)

    async def _read_viewer(self, token: str, now: float, epoch: int) -> Viewer | None:
        found = await authenticate(self.runtime, token)
        if found is None:
            self.viewers.pop(token, None)
            return None
        if epoch == self._viewer_epoch:
            if len(self.viewers) >= VIEWER_CACHE_LIMIT:
                self.viewers.clear()
            self.viewers[token] = (now + VIEWER_TTL, found)
        return found

    def _watch_grants(self, runtime: Runtime) -> Callable[[], Awaitable[None]]:
        """Drop cached viewers whenever this node commits a registry event."""

        async def on_commit(messages: Sequence[dict[str, Any]]) -> None:
            if any(str(m.get("type", "")).startswith("registry.") for m in messages):
                self.forget_viewers()

        runtime.publishers.insert(0, on_commit)

        async def stop() -> None:
            with contextlib.suppress(ValueError):
                runtime.publishers.remove(on_commit)

        return stop


def _share_rate_limit(runtime: Runtime, settings: Settings) -> Callable[[], Awaitable[None]]:
    """With a `redis://` bus, one set of rate limits for all nodes (the public entry's and
    the callback-token failures', in the bus's Redis, keyed by the bus channel);
    otherwise each node keeps its own. Returns the closer."""
    if not settings.bus_url.startswith(("redis://", "rediss://")):
        return _nothing
    from redis import asyncio as aioredis

    from stateward.runtime.core.rate_limit import (
        CALLBACK_FAILURES,
        PUBLIC,
        SharedRateLimiter,
        install_limiter,
        per_minute,
    )

    client = aioredis.Redis.from_url(settings.bus_url)
    prefix = f"stateward:ratelimit:{bus_channel(settings)}"
    for purpose in (PUBLIC, CALLBACK_FAILURES):
        # the public buckets keep the key they had before there were two purposes
        keyed = prefix if purpose == PUBLIC else f"{prefix}:{purpose}"
        limit = per_minute(settings, purpose)
        install_limiter(runtime, SharedRateLimiter(limit, client, keyed), purpose)

    async def close() -> None:
        await client.aclose()

    return close


async def _nothing() -> None:
    return None


def create_services(settings: Settings) -> Services:
    """The services of a node for `settings` (nothing connects until `start()`)."""
    return Services(settings)


async def ensure_genesis(runtime: Runtime, key_file: Path) -> Bootstrap:
    """On a deployment without a system registry, grant `admin` to the operator key in
    `key_file` (generated, mode 0600, when missing) and trust this node's key with it.
    On an initialized one, trust this node's key when the log does not yet and the
    operator key file is there (and a system admin); else warn that its attestations
    will not verify."""
    async with runtime.uow(readonly=True) as uow:
        initialized = await uow.processes.get(registry_id(SYSTEM_NAMESPACE)) is not None
    if initialized:
        if not await runtime.node_trusted():
            if key_file.exists():
                await genesis.init(runtime, read_key_file(key_file))
            if not await runtime.node_trusted():
                log.warning(
                    "node key %s is not trusted by the log: events it attests will fail "
                    "`verify` until a system admin runs `stateward key trust %s`",
                    runtime.node_public,
                    runtime.node_public,
                )
        return Bootstrap()
    if key_file.exists():
        operator = read_key_file(key_file)
    else:
        operator = generate_keypair()
        key_file.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another node made it meanwhile
            write_key_file(key_file, operator)
        operator = read_key_file(key_file)
    result = await genesis.init(runtime, operator)
    return Bootstrap(created=result.created, operator_key_file=key_file, operator=operator.public)


def _start_batches(runtime: Runtime) -> Callable[[], Awaitable[None]]:
    """Work on running bulk operations in the background (issue 15): a batch created on any
    node, or left running by a node that stopped, is finished by whichever nodes are up."""
    from stateward.runtime.batches.bulk import Worker

    worker = Worker(runtime)
    worker.start()
    return worker.stop


def _start_delivery(runtime: Runtime) -> Callable[[], Awaitable[None]]:
    """Deliver the messages an event made pending right after its commit (issue 15), as
    background tasks; whatever they miss the ticker's message sweep delivers."""
    from stateward.runtime.messages.correlate import deliver

    tasks: set[asyncio.Task[Any]] = set()

    async def run(rt: Runtime, deliveries: Sequence[int]) -> None:
        task = asyncio.create_task(deliver(rt, list(deliveries)), name="deliver-messages")
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    runtime.deliverers.append(run)

    async def stop() -> None:
        with contextlib.suppress(ValueError):
            runtime.deliverers.remove(run)
        pending = list(tasks)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    return stop


def _start_automation(runtime: Runtime, hooks: HookRunner) -> Callable[[], Awaitable[None]]:
    """Run system-state hooks after each commit that enters such a state.

    Each run is a background task: the committing request returns without waiting for
    the hook; the automated events follow over the bus.
    """
    from stateward.runtime.hooks.automation import automate

    tasks: set[asyncio.Task[None]] = set()

    async def guarded(rt: Runtime, process_id: str, hook: str) -> None:
        try:
            await automate(rt, hooks, process_id, hook)
        except Exception:
            log.exception("automation of %s (%s) failed", process_id, hook)

    async def run(rt: Runtime, process_id: str, hook: str) -> None:
        task = asyncio.create_task(guarded(rt, process_id, hook), name=f"automate:{process_id}")
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    runtime.automation.append(run)

    async def stop() -> None:
        with contextlib.suppress(ValueError):
            runtime.automation.remove(run)
        pending = list(tasks)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    return stop


def _start_checkpointer(runtime: Runtime) -> Callable[[], Awaitable[None]]:
    """Sign a checkpoint of the log every `settings.checkpoint_interval` seconds."""
    from stateward.runtime.insight.checkpoints import Checkpointer

    checkpointer = Checkpointer(runtime)
    checkpointer.start()
    return checkpointer.stop


def _start_ticker(runtime: Runtime) -> Callable[[], Awaitable[None]]:
    """Start the SLA / timer / staleness / webhook loop (`settings.scan_interval`)."""
    from stateward.runtime.ticker import Ticker

    ticker = Ticker(runtime)
    ticker.start()
    return ticker.stop


def _release_revoked_claims(runtime: Runtime) -> Callable[[], Awaitable[None]]:
    """A revoked assignee's claims go back to its team's queue (`$unclaim` by system)."""
    from stateward.runtime.queues.assignments import install_release

    return install_release(runtime)
