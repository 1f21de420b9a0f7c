"""The node's services: everything `stateward serve` runs, built from `Settings`.

`create_services(settings)` is what `stateward.app.create_app` loads by default. The
returned `Services` object is the composition root of a node (it wires the runtime, the
event bus, the outbox relay, the hook sandbox and the periodic ticker), and it is what
resolvers read as `info.context.services`: `.runtime`, `.bus`, `.relay`, `.hooks`.

`start()` opens the database (running the migrations), makes sure the deployment has a
system registry (on a fresh database it creates the genesis for an operator key file, see
`operator_key_path`), then starts the relay, the bus, the hook automation and the ticker.
`stop()` undoes it in reverse order. `ready()` pings the database and the bus;
`authenticate(token)` resolves bearer tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url

from stateward.domain.paths import SYSTEM_NAMESPACE, registry_id
from stateward.governance.keys import generate_keypair, read_key_file, write_key_file
from stateward.runtime import genesis
from stateward.runtime.auth import Viewer, authenticate
from stateward.runtime.hooks import HookRunner
from stateward.runtime.services import Runtime
from stateward.settings import Settings
from stateward.subscriptions.bus import DEFAULT_CHANNEL, EventBus
from stateward.subscriptions.relay import OutboxRelay

log = logging.getLogger(__name__)

OPERATOR_KEY_ENV = "STATEWARD_OPERATOR_KEY_FILE"
BUS_CHANNEL_ENV = "STATEWARD_BUS_CHANNEL"
OPERATOR_FILE = "stateward-operator.json"
READY_TIMEOUT = 1.5


def operator_key_path(settings: Settings) -> Path:
    """Where a fresh deployment's operator key lives (created by `serve` if missing).

    `settings.extra["operator_key_file"]` or `$STATEWARD_OPERATOR_KEY_FILE` when set;
    beside a SQLite file `<name>.db` as `<name>-operator.json` (so the default
    `./stateward.db` gets `./stateward-operator.json`); else `./stateward-operator.json`.
    """
    explicit = (settings.extra or {}).get("operator_key_file") or os.environ.get(OPERATOR_KEY_ENV)
    if explicit:
        return Path(str(explicit))
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        db = Path(url.database)
        return db.with_name(f"{db.stem}-operator.json")
    return Path(OPERATOR_FILE)


def bus_channel(settings: Settings) -> str:
    """The bus channel: `settings.extra["bus_channel"]`, `$STATEWARD_BUS_CHANNEL` or the
    default (nodes of one deployment must agree; tests isolate themselves with it)."""
    value = (settings.extra or {}).get("bus_channel") or os.environ.get(BUS_CHANNEL_ENV)
    return str(value) if value else DEFAULT_CHANNEL


@dataclass
class Bootstrap:
    """What `start()` found or did about the deployment's genesis."""

    created: bool = False
    operator_key_file: Path | None = None
    operator: str | None = None


@dataclass
class Services:
    """One node's running parts (see the module docstring)."""

    settings: Settings
    bus: EventBus
    hooks: HookRunner
    runtime: Runtime = field(init=False)
    relay: OutboxRelay = field(init=False)
    bootstrap: Bootstrap = field(default_factory=Bootstrap)
    background: list[Any] = field(default_factory=list)
    _stops: list[Callable[[], Awaitable[Any]]] = field(default_factory=list)

    @property
    def started(self) -> bool:
        """True between a successful `start()` and `stop()`."""
        return hasattr(self, "relay")

    async def start(self) -> None:
        """Open the database, ensure the genesis, start relay, bus, automation and ticker."""
        try:
            self.runtime = await Runtime.open(self.settings)
            self._stops.append(self.runtime.close)
            self.bootstrap = await ensure_genesis(self.runtime, operator_key_path(self.settings))
            self._stops.append(self.hooks.close)
            self.relay = OutboxRelay(self.runtime, self.bus)
            await self.relay.start()
            self._stops.append(self.relay.stop)
            await self.bus.start()
            self._stops.append(self.bus.stop)
            for name, part in (("automation", _automation), ("ticker", _ticker)):
                stop = await part(self)
                if stop is not None:
                    self._stops.append(stop)
                    self.background.append(name)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop everything `start()` started, newest first (errors are logged)."""
        stops, self._stops = self._stops, []
        for stop in reversed(stops):
            try:
                await stop()
            except Exception:
                log.exception("error while stopping %s", getattr(stop, "__qualname__", stop))

    async def ready(self) -> dict[str, bool]:
        """Readiness checks: the database answers and the bus subscription is live."""
        return {"database": await self._ping(), "bus": self.bus.connected}

    async def _ping(self) -> bool:
        if not self.started:
            return False
        try:
            async with asyncio.timeout(READY_TIMEOUT), self.runtime.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception:
            return False
        return True

    async def authenticate(self, token: str) -> Viewer | None:
        """The viewer a bearer token stands for (None: unknown, expired or revoked)."""
        return await authenticate(self.runtime, token)


def create_services(settings: Settings) -> Services:
    """The services of a node for `settings` (nothing connects until `start()`)."""
    channel = bus_channel(settings)
    bus = EventBus(settings.bus_url, channel=channel, client_name=f"stateward-bus:{channel}")
    return Services(settings=settings, bus=bus, hooks=HookRunner.from_settings(settings))


async def ensure_genesis(runtime: Runtime, key_file: Path) -> Bootstrap:
    """On a deployment without a system registry, grant `admin` to the operator key in
    `key_file` (generated, mode 0600, when missing). Does nothing on an initialized one."""
    async with runtime.uow(readonly=True) as uow:
        if await uow.processes.get(registry_id(SYSTEM_NAMESPACE)) is not None:
            return Bootstrap()
    if key_file.exists():
        operator = read_key_file(key_file)
    else:
        operator = generate_keypair()
        key_file.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another node made it meanwhile
            write_key_file(key_file, operator)
        operator = read_key_file(key_file)
    result = await genesis.init(runtime, operator.public)
    return Bootstrap(created=result.created, operator_key_file=key_file, operator=operator.public)


async def _automation(services: Services) -> Callable[[], Awaitable[Any]] | None:
    """Install the hook automation of system states when the runtime provides it."""
    module = _optional("stateward.runtime.automation")
    install = getattr(module, "install", None) if module else None
    if install is None:
        return None
    outcome = install(services.runtime, services.hooks)
    if asyncio.iscoroutine(outcome):
        outcome = await outcome
    return outcome if callable(outcome) else None


async def _ticker(services: Services) -> Callable[[], Awaitable[Any]] | None:
    """Start the SLA / timer / staleness ticker when the runtime provides it."""
    module = _optional("stateward.runtime.ticker")
    ticker_cls = getattr(module, "Ticker", None) if module else None
    if ticker_cls is None:
        return None
    ticker = ticker_cls(services.runtime)
    await ticker.start()
    return ticker.stop  # type: ignore[no-any-return]


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None
