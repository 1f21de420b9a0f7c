"""The `Runtime`: one object holding everything the runtime services need.

Settings, the database engine and its unit-of-work factory, the node key (whose public
key is a trusted signer of server-attested events), the deployment's `net` id, the clock,
a cache of loaded definitions and the after-commit publishers. Build it with
`await Runtime.open(settings)` and release it with `await runtime.close()`; nothing
connects at import time.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from stateward.domain.bootstrap import bootstrap_definition
from stateward.domain.definition import load_definition
from stateward.domain.errors import NOT_FOUND, DomainError
from stateward.domain.model import Definition
from stateward.domain.paths import SYSTEM_NAMESPACE, registry_id
from stateward.domain.registry import trusted_nodes
from stateward.governance.keys import KeyPair, generate_keypair
from stateward.governance.node_key import load_or_create_node_key
from stateward.persistence import (
    UnitOfWork,
    UnitOfWorkFactory,
    create_engine,
    init_schema,
    sqlite_file,
)
from stateward.persistence.outbox import HANDOFF_KEY
from stateward.persistence.uow import DbTimeouts
from stateward.records import WorkflowVersionRecord
from stateward.runtime.core.clock import Clock, SystemClock
from stateward.runtime.core.grantcache import GrantCache
from stateward.settings import Settings

log = logging.getLogger(__name__)
#: Seconds between two hand-off marks of a runtime without publishers (relays wait 5 s).
HANDOFF_EVERY = 1.0

NET_KEY = "net"
#: Node keys trusted before node trust was governed by `trust_node` events: migration
#: 0009 renamed the old unsigned `trusted_signers` row to this one. They stay trusted
#: (as if trusted from log index 0) until a `distrust_node`; nothing adds to the row.
LEGACY_NODES_KEY = "legacy_trusted_nodes"

#: After-commit publisher: receives the §9 bus messages (outbox rows with their ids).
Publisher = Callable[[Sequence[dict[str, Any]]], Awaitable[None]]
#: After-commit automation hook: (runtime, process id, `module:function`) of a system state.
AutomationHook = Callable[["Runtime", str, str], Awaitable[None]]
#: Delivers message deliveries made pending by a committed event (issue 15).
DeliveryHook = Callable[["Runtime", Sequence[int]], Awaitable[None]]


def default_node_key_path(settings: Settings) -> Path:
    """Where the node key lives when `STATEWARD_NODE_KEY_FILE` is unset.

    Beside a SQLite database file (`<db>.node-key.json`); otherwise (PostgreSQL, an
    in-memory SQLite) in `$XDG_DATA_HOME/stateward/node-key.json` (~/.local/share).
    """
    if settings.node_key_file:
        return Path(settings.node_key_file)
    db = sqlite_file(settings.database_url)
    if db is not None:
        return Path(f"{db}.node-key.json")
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "stateward" / "node-key.json"


@dataclass
class DefinitionCache:
    """Loaded definitions by (path, version): versions are immutable once committed, so
    never stale. Only committed rows are put here: a version stored by the transaction
    reading it stays with that transaction (`Runtime.definition`), since a rolled-back
    deploy's version number may later be stored with other content."""

    limit: int = 1024
    _items: dict[tuple[str, int], Definition] = field(default_factory=dict)
    #: (path, version) -> (the definition, when the version was stored), as read from a
    #: committed row (`committed`): what a read needs without reading the row again.
    _stored: dict[tuple[str, int], tuple[Definition, datetime]] = field(default_factory=dict)

    def get(self, path: str, version: int) -> Definition | None:
        """The cached definition, or None."""
        return self._items.get((path, version))

    def put(self, path: str, version: int, definition: Definition) -> Definition:
        """Remember `definition` (the whole cache is dropped when it grows past `limit`)."""
        if len(self._items) >= self.limit:
            self._items.clear()
        self._items[(path, version)] = definition
        return definition

    def from_record(self, record: WorkflowVersionRecord) -> Definition:
        """The definition stored in `record`, loaded once."""
        cached = self.get(record.path, record.version)
        if cached is not None and (record.hash_scheme != 2 or cached.hash == record.hash):
            return cached
        return self.put(record.path, record.version, load_definition(record.definition))

    def committed(self, record: WorkflowVersionRecord) -> Definition:
        """`from_record` for a row read outside any write (so committed, and a committed
        version never changes): its definition and storage time are then served by
        `stored` without reading the row again."""
        definition = self.from_record(record)
        if len(self._stored) >= self.limit:
            self._stored.clear()
        self._stored[(record.path, record.version)] = (definition, record.created_at)
        return definition

    def stored(self, path: str, version: int) -> tuple[Definition, datetime] | None:
        """(definition, stored at) of a version read before through `committed`, while
        the definition cached for it is still the one read then; else None."""
        found = self._stored.get((path, version))
        if found is None or self._items.get((path, version)) is not found[0]:
            return None
        return found


@dataclass
class Runtime:
    """What every runtime service works with (see the module docstring)."""

    settings: Settings
    engine: AsyncEngine
    uow: UnitOfWorkFactory
    node_key: KeyPair
    net: str
    clock: Clock
    trusted_signers: frozenset[str]
    definitions: DefinitionCache = field(default_factory=DefinitionCache)
    publishers: list[Publisher] = field(default_factory=list)
    automation: list[AutomationHook] = field(default_factory=list)
    deliverers: list[DeliveryHook] = field(default_factory=list)
    #: Route `act` through one writer task that commits several events per transaction.
    group_commit: bool = True
    committer: Any = field(default=None, repr=False)
    _handoff_top: int = field(default=0, repr=False)
    _handoff_written: int = field(default=0, repr=False)
    _handoff_at: float = field(default=float("-inf"), repr=False)
    #: `log restore` only: the exported `$start` envelopes of spawned children by child
    #: id, used instead of signing new ones so the rebuilt log is the same log.
    restoring: dict[str, Any] = field(default_factory=dict, repr=False)
    #: `log restore` only: history is being replayed, not made — a delegate's event is not
    #: refused for a token long expired, and no surface webhook is posted again.
    replaying: bool = False
    #: Process id -> the ancestors an event of it may write through `$child` (immutable
    #: facts: parent links and pinned versions never change), `joins.awaiting_ancestors`.
    ancestry: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    #: Live subscriptions' grant re-reads, shared per actor (`access/auth.SharedGrantReads`).
    grant_reads: Any = field(default=None, repr=False)
    #: Key statuses and roles across transactions, checked by the grants generation.
    grant_cache: GrantCache = field(default_factory=GrantCache, repr=False)

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        clock: Clock | None = None,
        create_schema: bool = True,
        node_key: KeyPair | None = None,
        engine: AsyncEngine | None = None,
        register_node: bool = True,
    ) -> Runtime:
        """Connect, migrate (unless `create_schema=False`), load or create the node key,
        read (or fix) the deployment's `net` id and register the node key as trusted.

        `register_node=False` (read-only tools such as `verify`) neither writes the node
        key's public key to the trusted list nor creates a missing key file: an ephemeral
        key stands in.
        """
        own_engine = engine is None
        engine = engine or create_engine(
            settings.database_url, sqlite_synchronous=settings.sqlite_synchronous
        )
        try:
            if create_schema:
                await init_schema(engine)
            if node_key is not None:
                key = node_key
            elif register_node or default_node_key_path(settings).exists():
                key = load_or_create_node_key(default_node_key_path(settings))
            else:
                key = generate_keypair()
            lock_ms = settings.lock_timeout_ms
            factory = UnitOfWorkFactory.from_engine(
                engine, DbTimeouts(lock_ms=lock_ms, idle_ms=lock_ms)
            )
            net, trusted = await _deployment_facts(factory, key.public, register=register_node)
        except BaseException:
            if own_engine:
                await engine.dispose()
            raise
        return cls(
            settings=settings,
            engine=engine,
            uow=factory,
            node_key=key,
            net=net,
            clock=clock or SystemClock(),
            trusted_signers=trusted,
        )

    async def close(self) -> None:
        """Stop the group-commit writer (if any) and release the database connections."""
        await self._hand_off((), now=True)
        if self.committer is not None:
            await self.committer.close()
            self.committer = None
        await self.engine.dispose()

    @property
    def node_public(self) -> str:
        """The node key's public key (the signer of server-attested events)."""
        return self.node_key.public

    async def refresh_trusted(self) -> frozenset[str]:
        """Re-read the trusted server keys (an admin may have trusted another node): the
        log's trusted node keys, plus this node's own key (a node always accepts what it
        attests itself; `verify` is where an untrusted node's events fail)."""
        async with self.uow(readonly=True) as uow:
            self.trusted_signers = await log_trusted_nodes(uow) | {self.node_public}
        return self.trusted_signers

    async def node_trusted(self) -> bool:
        """Does the log trust this node's key (a `trust_node` event, or legacy trust)?"""
        async with self.uow(readonly=True) as uow:
            return self.node_public in await log_trusted_nodes(uow)

    async def publish(self, messages: Sequence[dict[str, Any]]) -> None:
        """Hand committed bus messages to every publisher; a failing publisher is logged
        (the outbox relay republishes what was not marked published)."""
        if not messages:
            return
        if not self.publishers:
            await self._hand_off(messages)
            return
        for publisher in list(self.publishers):
            try:
                await publisher(messages)
            except Exception:  # a bus outage must never fail a committed event
                log.exception("publisher failed; the outbox relay will retry")

    async def _hand_off(self, messages: Sequence[dict[str, Any]], *, now: bool = False) -> None:
        """No bus here: record that these rows are the relays' to publish (HANDOFF_KEY).

        At most one small write per `HANDOFF_EVERY` seconds (and one at `close`), well
        within the relays' grace, so a tool writing thousands of events pays little."""
        ids = [int(m["id"]) for m in messages if isinstance(m.get("id"), int)]
        self._handoff_top = max([self._handoff_top, *ids])
        due = time.monotonic() - self._handoff_at >= HANDOFF_EVERY
        if self._handoff_top <= self._handoff_written or not (now or due):
            return
        top, self._handoff_at = self._handoff_top, time.monotonic()
        try:
            async with self.uow() as uow:
                if top > int(await uow.meta.get(HANDOFF_KEY) or 0):
                    await uow.meta.set(HANDOFF_KEY, str(top))
                    await uow.commit()
            self._handoff_written = top
        except Exception:  # the rows are safe in the outbox; only the log line is at stake
            log.warning("could not record outbox hand-off up to %d", top, exc_info=True)

    async def run_automation(self, process_id: str, hook: str) -> None:
        """Call the automation hooks for a process that entered a system state."""
        for hook_fn in list(self.automation):
            try:
                await hook_fn(self, process_id, hook)
            except Exception:
                log.exception("automation of %s failed", process_id)

    async def deliver_messages(self, deliveries: Sequence[int]) -> None:
        """Call the delivery hooks for deliveries a committed event made pending (the
        message sweep delivers whatever a hook did not)."""
        for hook_fn in list(self.deliverers):
            try:
                await hook_fn(self, deliveries)
            except Exception:
                log.exception("delivering messages %s failed", list(deliveries))

    async def definition(
        self, uow: UnitOfWork, path: str, version: int | None = None
    ) -> Definition:
        """The definition of `path` at `version` (latest when None; bootstraps built in).

        Raises NOT_FOUND when the path (or that version) was never deployed, or when the
        latest is requested and the workflow was removed.
        """
        if path.rsplit("/", 1)[-1] == "bootstrap":
            return bootstrap_definition(path.rsplit("/", 1)[0])
        if version is None:
            current = await uow.workflows.get(path)
            if current is None or current.removed:
                raise DomainError(NOT_FOUND, f"workflow {path} is not deployed")
            version = current.latest_version
        key = (path, version)
        written = uow.workflows.written
        own = key in written  # stored by this very transaction: not committed yet
        cached = written[key] if own else self.definitions.get(path, version)
        if cached is not None:
            return cached
        record = await uow.workflows.version(path, version)
        if record is None:
            raise DomainError(NOT_FOUND, f"workflow {path} version {version} does not exist")
        if own:  # remembered by this transaction only (it may yet roll back)
            written[key] = definition = load_definition(record.definition)
            return definition
        return self.definitions.from_record(record)


def _parse_list(text: str | None) -> set[str]:
    if not text:
        return set()
    try:
        value = json.loads(text)
    except ValueError:
        return set()
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


async def log_trusted_nodes(uow: UnitOfWork) -> frozenset[str]:
    """The node keys the log trusts now: `nodes` of the system registry's data (written
    by `trust_node` / `distrust_node` events) and the legacy keys not distrusted."""
    system = await uow.processes.get(registry_id(SYSTEM_NAMESPACE))
    legacy = frozenset(_parse_list(await uow.meta.get(LEGACY_NODES_KEY)))
    return trusted_nodes(system.data if system is not None else {}, legacy)


async def legacy_nodes(uow: UnitOfWork) -> frozenset[str]:
    """The legacy trusted node keys (migration 0009; empty on a deployment made since)."""
    return frozenset(_parse_list(await uow.meta.get(LEGACY_NODES_KEY)))


async def _deployment_facts(
    factory: UnitOfWorkFactory, node_public: str, *, register: bool = True
) -> tuple[str, frozenset[str]]:
    """(`net`, trusted signers): fixes `net` on first use. Trust in node keys is no
    longer written here: only `trust_node` events give it (`refresh_trusted`)."""
    del register
    for attempt in range(5):
        try:
            async with factory() as uow:
                net = await uow.meta.get_or_create(NET_KEY, uuid.uuid4().hex)
                trusted = await log_trusted_nodes(uow)
                await uow.commit()
            return net, trusted | {node_public}
        except IntegrityError:
            if attempt == 4:
                raise
        except DBAPIError as exc:
            # A connection the server ended (its idle-in-transaction bound while this
            # process was descheduled, a restart): starting up retries on a fresh one.
            if not exc.connection_invalidated or attempt == 4:
                raise
    raise AssertionError("unreachable")
