"""Deployed workflows and their immutable versions; Starlark modules and theirs."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, func, insert, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from stateward.domain.model import Definition
from stateward.persistence.base import Repository, chunks, to_record
from stateward.persistence.models import Module, Workflow, WorkflowVersion
from stateward.records import ModuleRecord, WorkflowRecord, WorkflowVersionRecord

W = cast(Table, Workflow.__table__)
V = cast(Table, WorkflowVersion.__table__)
M = cast(Table, Module.__table__)


def _workflow(row: Any) -> WorkflowRecord:
    return to_record(WorkflowRecord, row)


def _version(row: Any) -> WorkflowVersionRecord:
    return to_record(WorkflowVersionRecord, row)


class WorkflowRepository(Repository):
    """Workflows (one row per path) and workflow_versions (one row per version)."""

    def __init__(self, session: AsyncSession) -> None:
        super().__init__(session)
        #: (path, version) of the versions this transaction stored -> their loaded
        #: definition (None until `Runtime.definition` loads it): uncommitted until the
        #: transaction commits, so never remembered beyond it.
        self.written: dict[tuple[str, int], Definition | None] = {}

    async def get(self, path: str) -> WorkflowRecord | None:
        """The workflow at `path` (removed ones included: check `removed`), or None."""
        row = (await self.session.execute(select(W).where(W.c.path == path))).one_or_none()
        return None if row is None else _workflow(row)

    async def by_paths(self, paths: Iterable[str]) -> dict[str, WorkflowRecord]:
        """Batch loader: workflows by path."""
        found: dict[str, WorkflowRecord] = {}
        for batch in chunks(dict.fromkeys(paths)):
            for row in await self.session.execute(select(W).where(W.c.path.in_(batch))):
                found[row.path] = _workflow(row)
        return found

    async def in_namespace(
        self, namespace: str | None = None, *, include_removed: bool = False
    ) -> list[WorkflowRecord]:
        """Workflows of `namespace` (every namespace when None), by path."""
        stmt = select(W).order_by(W.c.path)
        if namespace is not None:
            stmt = stmt.where(W.c.namespace == namespace)
        if not include_removed:
            stmt = stmt.where(W.c.removed.is_(False))
        return [_workflow(r) for r in await self.session.execute(stmt)]

    async def add_version(
        self,
        path: str,
        definition: str,
        hash: str,
        now: datetime,
        event_id: int | None = None,
        hash_scheme: int = 2,
    ) -> WorkflowVersionRecord:
        """Store `definition` (JSON text as authored: RFC 8785 would lose map order) as the
        next version of `path`; `hash` is its version hash under `hash_scheme`.

        Creates the workflow row on first use and clears `removed` (re-adding a path).
        Concurrent deploys of one path serialise on the registry's event seq; the
        unique (path, version) is the backstop.
        """
        current = await self.get(path)
        namespace, name = path.rsplit("/", 1)
        if current is None:
            version = 1
            await self.session.execute(
                insert(W).values(
                    path=path,
                    namespace=namespace,
                    name=name,
                    latest_version=1,
                    removed=False,
                    created_at=now,
                    updated_at=now,
                )
            )
        else:
            version = current.latest_version + 1
            await self.session.execute(
                update(W)
                .where(W.c.path == path)
                .values(latest_version=version, removed=False, updated_at=now)
            )
        record = WorkflowVersionRecord(path, version, hash, definition, now, event_id, hash_scheme)
        self.written[(path, version)] = None
        await self.session.execute(
            insert(V).values(
                path=path,
                version=version,
                hash=hash,
                definition=definition,
                created_at=now,
                event_id=event_id,
                hash_scheme=hash_scheme,
            )
        )
        return record

    async def remove(self, path: str, now: datetime) -> bool:
        """Mark `path` removed (versions stay: running instances keep their pin)."""
        stmt = (
            update(W)
            .where(W.c.path == path, W.c.removed.is_(False))
            .values(removed=True, updated_at=now)
        )
        result = await self.session.execute(stmt)
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def version(self, path: str, version: int | None = None) -> WorkflowVersionRecord | None:
        """Version `version` of `path` (the latest when None), or None."""
        stmt = select(V).where(V.c.path == path)
        if version is None:
            stmt = stmt.order_by(V.c.version.desc()).limit(1)
        else:
            stmt = stmt.where(V.c.version == version)
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else _version(row)

    async def versions(self, path: str) -> list[WorkflowVersionRecord]:
        """Every version of `path`, oldest first."""
        stmt = select(V).where(V.c.path == path).order_by(V.c.version)
        return [_version(r) for r in await self.session.execute(stmt)]

    async def versions_by_keys(
        self, keys: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], WorkflowVersionRecord]:
        """Batch loader: versions by (path, version)."""
        found: dict[tuple[str, int], WorkflowVersionRecord] = {}
        for batch in chunks(dict.fromkeys(keys)):
            stmt = select(V).where(tuple_(V.c.path, V.c.version).in_(batch))
            for row in await self.session.execute(stmt):
                found[(row.path, row.version)] = _version(row)
        return found

    async def latest_versions(self, paths: Iterable[str]) -> dict[str, WorkflowVersionRecord]:
        """Batch loader: the latest version of each path."""
        found: dict[str, WorkflowVersionRecord] = {}
        for batch in chunks(dict.fromkeys(paths)):
            stmt = (
                select(V)
                .join(W, (W.c.path == V.c.path) & (W.c.latest_version == V.c.version))
                .where(V.c.path.in_(batch))
            )
            for row in await self.session.execute(stmt):
                found[row.path] = _version(row)
        return found

    async def namespaces(self) -> list[str]:
        """Namespaces that hold at least one live workflow, sorted."""
        stmt = select(W.c.namespace).where(W.c.removed.is_(False)).distinct()
        return sorted((await self.session.execute(stmt)).scalars())


class ModuleRepository(Repository):
    """Starlark modules: one row per (namespace, name, version)."""

    async def add_version(
        self,
        namespace: str,
        name: str,
        source: str,
        hash: str,
        now: datetime,
        event_id: int | None = None,
    ) -> ModuleRecord:
        """Store `source` as the next version of module `namespace`/`name`."""
        stmt = select(func.max(M.c.version)).where(M.c.namespace == namespace, M.c.name == name)
        version = int((await self.session.execute(stmt)).scalar_one() or 0) + 1
        values = dict(
            namespace=namespace,
            name=name,
            version=version,
            hash=hash,
            source=source,
            created_at=now,
            event_id=event_id,
        )
        await self.session.execute(insert(M).values(**values))
        return ModuleRecord(**values)  # type: ignore[arg-type]

    async def get(
        self, namespace: str, name: str, version: int | None = None
    ) -> ModuleRecord | None:
        """Version `version` of the module (latest when None), or None."""
        stmt = select(M).where(M.c.namespace == namespace, M.c.name == name)
        if version is None:
            stmt = stmt.order_by(M.c.version.desc()).limit(1)
        else:
            stmt = stmt.where(M.c.version == version)
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else to_record(ModuleRecord, row)

    async def latest_in(self, namespace: str) -> list[ModuleRecord]:
        """The latest version of every module of `namespace`, by name."""
        latest = (
            select(M.c.name, func.max(M.c.version).label("version"))
            .where(M.c.namespace == namespace)
            .group_by(M.c.name)
            .subquery()
        )
        stmt = (
            select(M)
            .join(latest, (latest.c.name == M.c.name) & (latest.c.version == M.c.version))
            .where(M.c.namespace == namespace)
            .order_by(M.c.name)
        )
        return [to_record(ModuleRecord, r) for r in await self.session.execute(stmt)]
