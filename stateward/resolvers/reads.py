"""Query resolvers: read context, call one runtime read service, return what it read.

They return records, domain values or `Page`s of them; the schema types wrap them.

Reads are limited to namespaces where the viewer holds a role; anything else looks like a
missing object (NOT_FOUND), so other tenants' ids cannot be probed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from strawberry.types import Info

from stateward.domain.definition import ValidationReport, validate_definition
from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.lint import spawn_entries
from stateward.domain.paths import is_canonical_path, is_namespace, registry_id, split_path
from stateward.records import ProcessRecord, StoredEvent
from stateward.resolvers.context import require_read, runtime, viewer, viewer_or_none
from stateward.resolvers.ids import local_id
from stateward.resolvers.loaders import VersionedDefinition, loaders
from stateward.resolvers.paging import (
    Page,
    Window,
    decode_cursor,
    encode_cursor,
    known_total,
    page_of,
    page_of_list,
)
from stateward.runtime.access import registry
from stateward.runtime.access.registry import DeployedWorkflow
from stateward.runtime.core import policy, queries, references
from stateward.runtime.core.queries import RegistryFacts
from stateward.runtime.insight import analytics
from stateward.runtime.insight.verify import VerificationReport


def _namespace_of_path(path: str) -> str:
    if not is_canonical_path(path) and not path.endswith("/bootstrap"):
        raise DomainError(INVALID_INPUT, f"{path!r} is not a canonical workflow path",
                          pointer="/path")  # fmt: skip
    return split_path(path)[0]


def viewer_actor(info: Info) -> str | None:
    """`Query.viewer`: the authenticated actor's id, or None for anonymous callers."""
    found = viewer_or_none(info)
    return None if found is None else found.actor


async def actor_roles(info: Info, actor: str, namespace: str) -> list[str]:
    """`Actor.roles(namespace)`: the viewer's own from its grants, others' from the runtime."""
    me = viewer(info)
    if actor == me.actor:
        return sorted(me.roles_in(namespace))
    require_read(info, namespace, "namespace")
    return sorted(await registry.roles_of(runtime(info), actor, namespace))


def actor_namespaces(info: Info, actor: str) -> list[str]:
    """`Actor.namespaces`: where the viewer holds grants (empty for other actors)."""
    me = viewer(info)
    return sorted({g.namespace for g in me.grants}) if actor == me.actor else []


async def namespaces(info: Info) -> list[str]:
    """`Query.namespaces`: namespaces the viewer may read, sorted."""
    me = viewer(info)
    return me.readable(await queries.instance_namespaces(runtime(info)))


async def registry_of(info: Info, namespace: str) -> RegistryFacts:
    """`Query.registry(namespace)`."""
    if not is_namespace(namespace):
        raise DomainError(INVALID_INPUT, f"{namespace!r} is not a namespace", pointer="/namespace")
    require_read(info, namespace, "registry")
    return await queries.registry_facts(runtime(info), namespace, registry_id(namespace))


async def workflow(info: Info, path: str, version: int | None) -> DeployedWorkflow:
    """`Query.workflow(path, version)`: the latest version unless one is named."""
    require_read(info, _namespace_of_path(path), "workflow")
    found = await registry.get_workflow(runtime(info), path, version)
    if found is None:
        raise policy.not_found("workflow")
    return found


async def workflows(
    info: Info, namespace: str | None, first: int | None, after: str | None,
    last: int | None = None, before: str | None = None,
) -> Page[DeployedWorkflow]:  # fmt: skip
    """`Query.workflows(namespace)`: latest versions, by path, in readable namespaces."""
    me = viewer(info)
    if namespace is not None:
        require_read(info, namespace, "namespace")
    found = await registry.list_workflows(runtime(info), namespace)
    visible = [w for w in found if me.can_read(w.namespace)]
    return page_of_list(visible, first, after, lambda w: (w.path,), last, before)


async def workflow_versions(
    info: Info, path: str, first: int | None, after: str | None,
    last: int | None = None, before: str | None = None,
) -> Page[VersionedDefinition]:  # fmt: skip
    """`Workflow.versions`: every stored version of the path, oldest first."""
    require_read(info, _namespace_of_path(path), "workflow")
    rt = runtime(info)
    rows = await queries.workflow_versions(rt, path)
    page = page_of_list(rows, first, after, lambda r: (r.version,), last, before)
    return page.map(
        lambda r: VersionedDefinition(rt.definitions.from_record(r), r.version, r.created_at)
    )


async def workflow_analytics(
    info: Info,
    path: str,
    version: int | None,
    *,
    period: str | None = None,
    from_: datetime | None = None,
    to: datetime | None = None,
) -> analytics.WorkflowAnalytics:
    """`Workflow.analytics`: throughput, cycle time, dwell, SLA compliance, status counts."""
    require_read(info, _namespace_of_path(path), "workflow")
    return await analytics.analytics(
        runtime(info), path, version, period=period, from_=from_, to=to
    )


async def instance(info: Info, ident: str) -> ProcessRecord:
    """`Query.instance(id)`: by UUID or node id; NOT_FOUND when not visible."""
    pid = local_id(ident, "Instance")
    found = await loaders(info).process.load(pid)
    return policy.readable_process(viewer(info), found)


async def process_events(
    info: Info, process: str, first: int | None, after: str | None,
    last: int | None = None, before: str | None = None,
) -> Page[StoredEvent]:  # fmt: skip
    """`Query.events(process)` / `Instance.events`: a process's log in seq order, paged
    forward (`first/after`) or backward (`last/before`); cursors `[seq]` both ways."""
    pid = local_id(process, "Instance")
    found = await loaders(info).process.load(pid)
    record = policy.readable_process(viewer(info), found, kind=None)
    window = Window.of(first, after, last, before)
    if window.backward:
        return await _process_events_backward(info, pid, record.seq, window)
    limit = window.limit
    after_seq = 0
    if after is not None:
        values = decode_cursor(after)
        if not values or not isinstance(values[0], int):
            raise DomainError(INVALID_INPUT, "invalid cursor", pointer="/after")
        after_seq = values[0]
    rows = await queries.process_events(runtime(info), pid, after_seq=after_seq, limit=limit + 1)
    page = page_of(rows, limit, key=lambda e: (e.seq,), has_previous=after_seq > 0)
    return page.counted(known_total(record.seq))


async def _process_events_backward(
    info: Info, pid: str, seq: int, window: Window
) -> Page[StoredEvent]:
    mark = None
    if window.cursor is not None:
        values = decode_cursor(window.cursor, "/before")
        if not values or not isinstance(values[0], int):
            raise DomainError(INVALID_INPUT, "invalid cursor", pointer="/before")
        mark = values[0]
    below = seq + 1 if mark is None else mark
    n = window.limit
    rows = await queries.process_events(runtime(info), pid, limit=n + 1, before_seq=below)
    items = rows[max(0, len(rows) - n) :]
    cursors = [encode_cursor((e.seq,)) for e in items]
    return Page(items, cursors, mark is not None, len(rows) > n, known_total(seq))


async def verify_process(info: Info, ident: str) -> VerificationReport:
    """`Query.verifyProcess(id)`: signatures, chain and replay of one process."""
    from stateward.runtime.insight.verify import verify

    pid = local_id(ident, "Instance")
    found = await loaders(info).process.load(pid)
    policy.readable_process(viewer(info), found, kind=None)
    return await verify(runtime(info), pid)


async def validate(info: Info, definition: Any) -> ValidationReport:
    """`Query.validateWorkflow(definition)`: every error and warning, nothing stored.

    With a viewer, spawn targets and hook modules are checked as `addWorkflow` checks them
    (the same problems); anonymous callers get the shape checks only (no deployment facts
    are revealed). When the viewer may not read the definition's own namespace, no module
    counts as deployed (every hook is UNRESOLVED_HOOK, whether its module exists or not).
    """
    deployed = None
    modules: Callable[[str], bool] | None = None
    entries: frozenset[str] = frozenset()
    me = viewer_or_none(info)
    if me is not None:
        modules = frozenset[str]().__contains__
        # Only what the viewer may read: a foreign path is UNRESOLVED_SPAWN whether it
        # exists or not, so validation never tells whether it does.
        workflows = await registry.list_workflows(runtime(info))
        found = [w.path for w in workflows]
        deployed = {p for p in found if policy.can_read(me, split_path(p)[0])}
        own = definition.get("$path") if isinstance(definition, Mapping) else None
        if is_canonical_path(own) and policy.can_read(me, split_path(str(own))[0]):
            # ... and what other namespaces allow the definition's own to spawn.
            deployed |= await references.spawnable(runtime(info), split_path(str(own))[0], found)
            usable = await references.modules_usable(
                runtime(info), split_path(str(own))[0], definition
            )
            modules = usable.__contains__
            # States the readable deployed workflows' spawns start it in are entries.
            readable = (w.definition.source for w in workflows if w.path in deployed)
            entries = spawn_entries(readable, str(own))
    return validate_definition(definition, deployed=deployed, spawned_into=entries, modules=modules)
