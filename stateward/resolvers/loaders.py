"""Per-request DataLoaders: batch the reads of one GraphQL request, one query per kind.

graphql-core resolves sibling fields concurrently, so no two resolvers may share an
`AsyncSession`: every batch opens its own read-only unit of work. Loaders are created in
`get_context` (by `stateward.http.context.create_loaders`) and live for one request only, so a
cached value is never older than the request that read it. Workflow versions are the
exception: immutable once committed, each is read once per process
(`DefinitionCache.committed`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from strawberry.dataloader import DataLoader
from strawberry.types import Info

from stateward.domain.bootstrap import bootstrap_definition
from stateward.domain.model import Definition
from stateward.records import AssignmentRecord, ProcessRecord, StoredEvent
from stateward.runtime.core.services import Runtime

LOADERS_KEY = "graph"
BOOTSTRAP = "bootstrap"


@dataclass(frozen=True)
class VersionedDefinition:
    """A workflow version as the schema needs it: the definition and when it was stored."""

    definition: Definition
    version: int
    created_at: Any = None


class Loaders:
    """The DataLoaders of one request (see the module docstring)."""

    def __init__(self, runtime: Runtime, *, cache: bool = True) -> None:
        self.runtime = runtime
        self.process: DataLoader[str, ProcessRecord | None] = DataLoader(
            self._processes, cache=cache
        )
        self.version: DataLoader[tuple[str, int], VersionedDefinition | None] = DataLoader(
            self._versions
        )
        self.assignments: DataLoader[str, list[AssignmentRecord]] = DataLoader(
            self._assignments, cache=cache
        )
        self.last_events: DataLoader[tuple[str, int], list[StoredEvent]] = DataLoader(
            self._last_events, cache=cache
        )
        self.children: DataLoader[str, list[ProcessRecord]] = DataLoader(
            self._children, cache=cache
        )

    def prime_process(self, record: ProcessRecord) -> None:
        """Remember a process read by a listing so `process.load(id)` costs nothing."""
        self.process.prime(record.id, record)

    async def _processes(self, ids: Sequence[str]) -> list[ProcessRecord | None]:
        async with self.runtime.uow(readonly=True) as uow:
            found = await uow.processes.processes_by_ids(ids)
        return [found.get(i) for i in ids]

    async def _versions(self, keys: Sequence[tuple[str, int]]) -> list[VersionedDefinition | None]:
        definitions = self.runtime.definitions
        known: dict[tuple[str, int], VersionedDefinition] = {}
        unread: list[tuple[str, int]] = []
        for path, version in keys:
            namespace, _, name = path.rpartition("/")
            if name == BOOTSTRAP:
                known[(path, version)] = VersionedDefinition(
                    bootstrap_definition(namespace), version
                )
            elif (stored := definitions.stored(path, version)) is not None:
                known[(path, version)] = VersionedDefinition(stored[0], version, stored[1])
            else:
                unread.append((path, version))
        if unread:  # versions are immutable: a row read once is not read again
            async with self.runtime.uow(readonly=True) as uow:
                records = await uow.workflows.versions_by_keys(unread)
            for key, record in records.items():
                definition = definitions.committed(record)
                known[key] = VersionedDefinition(definition, key[1], record.created_at)
        return [known.get(key) for key in keys]

    async def _assignments(self, ids: Sequence[str]) -> list[list[AssignmentRecord]]:
        async with self.runtime.uow(readonly=True) as uow:
            found = await uow.assignments.assignments_by_process(ids)
        return [found.get(i, []) for i in ids]

    async def _last_events(self, keys: Sequence[tuple[str, int]]) -> list[list[StoredEvent]]:
        by_count: dict[int, list[str]] = defaultdict(list)
        for pid, n in keys:
            by_count[n].append(pid)
        found: dict[tuple[str, int], list[StoredEvent]] = {}
        async with self.runtime.uow(readonly=True) as uow:
            for n, pids in by_count.items():
                rows = await uow.events.latest_events_by_process(pids, n)
                found.update({(pid, n): rows.get(pid, []) for pid in pids})
        return [found.get(k, []) for k in keys]

    async def _children(self, ids: Sequence[str]) -> list[list[ProcessRecord]]:
        async with self.runtime.uow(readonly=True) as uow:
            found = await uow.processes.children_by_parents(ids)
        for kids in found.values():
            for kid in kids:
                self.prime_process(kid)
        return [found.get(i, []) for i in ids]


def create_loaders(runtime: Runtime, *, cache: bool = True) -> dict[str, Any]:
    """The loaders of a new request, as the `loaders` dict of the request context.

    A websocket's context lives as long as the socket: pass `cache=False` there so rows
    are batched per tick but never served stale (versions are immutable: always cached).
    """
    return {LOADERS_KEY: Loaders(runtime, cache=cache)}


def loaders(info: Info) -> Loaders:
    """This request's loaders (created on first use when the context has none)."""
    found = info.context.loaders.get(LOADERS_KEY)
    if found is None:
        found = Loaders(info.context.services.runtime)
        info.context.loaders[LOADERS_KEY] = found
    return found  # type: ignore[no-any-return]
