"""Creating, processing and cancelling bulk operations (issue 15).

`create` fixes the batch's membership (the instances its filter matches now, in the
namespaces where the creator holds `admin` or `operator`) as `batch_items` rows. Any node
then `process`es it: it claims a page of items (`FOR UPDATE SKIP LOCKED` on PostgreSQL, a
lease so a dead node's claims come back), appends one event per instance through `act` —
by `system`, signed by the node key, the batch's operator recorded on the batch — and
records each outcome. Every item's envelope carries a nonce derived from (batch, instance):
the `(actor, nonce)` uniqueness of the log means a second attempt (a retry after a crash,
another node after a lease ran out) can never write a second event; it is answered
`REPLAYED`, which counts as done. `Worker` runs `process` for every running batch on a
node, so a batch resumes after a restart on whichever node is up.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from stateward.domain.access import (
    ADMIN_ROLE,
    OPERATION_ROLES,
    holds_operation_role,
    require_operation_role,
)
from stateward.domain.errors import (
    CONFLICT,
    FORBIDDEN,
    INVALID_INPUT,
    NOT_FOUND,
    REPLAYED,
    UNAVAILABLE,
    DomainError,
)
from stateward.domain.migration import MIGRATE
from stateward.domain.model import SYSTEM_ACTOR
from stateward.domain.paths import is_canonical_path, split_path
from stateward.domain.search import InstanceSearch
from stateward.governance.envelope import SignedEnvelope, build_envelope
from stateward.governance.verification import sign_envelope
from stateward.persistence.batches import (
    CANCELLED,
    COMPLETED,
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
)
from stateward.records import BatchItemRecord, BatchRecord, ProcessRecord
from stateward.runtime.core import queries
from stateward.runtime.core.act import act
from stateward.runtime.core.kernel import CANCEL
from stateward.runtime.core.services import Runtime
from stateward.runtime.operate.incidents import RETRY, retry_input
from stateward.runtime.operate.migration import migration_input

log = logging.getLogger(__name__)

KINDS = ("cancel", "migrate", "retry", "action")
#: Roles that may run a bulk operation in a namespace (the rule of every issue-15 operation).
PAGE = 100
#: A claim older than this is another node's that died: claimed again.
LEASE_SECONDS = 60.0
MAX_INSTANCES = 100_000
#: Errors after which an item is tried again later (nothing was written).
_TRANSIENT = frozenset({CONFLICT, UNAVAILABLE})

#: kind -> builds (action name, input) for one instance (`migrate` is added by the
#: composition of `runtime.operate`).
Builder = Callable[[BatchRecord, ProcessRecord], tuple[str, dict[str, Any]]]


def _cancel(batch: BatchRecord, process: ProcessRecord) -> tuple[str, dict[str, Any]]:
    reason = batch.params.get("reason")
    return CANCEL, ({"reason": reason} if isinstance(reason, str) and reason else {})


def _action(batch: BatchRecord, process: ProcessRecord) -> tuple[str, dict[str, Any]]:
    return str(batch.params["action"]), dict(batch.params.get("input") or {})


def _migrate(batch: BatchRecord, process: ProcessRecord) -> tuple[str, dict[str, Any]]:
    """The same `$migrate` event `migrateInstance` builds (the one migration path)."""
    to_version = int(batch.params["toVersion"])
    state_map = batch.params.get("stateMap")
    return MIGRATE, migration_input(process.workflow_version, to_version, state_map)


def _retry(batch: BatchRecord, process: ProcessRecord) -> tuple[str, dict[str, Any]]:
    """A bare `$retry` (the row-free builder); `_build` replaces it with the input
    retryIncident builds (`retry_input`: the incident, the hook and the module deployed
    when the item is processed, or the failed timer). An instance that is not in `error`
    fails the item with INACTIVE_PROCESS."""
    return RETRY, {}


BUILDERS: dict[str, Builder] = {
    "cancel": _cancel,
    "action": _action,
    "migrate": _migrate,
    "retry": _retry,
}


@dataclass
class Progress:
    """What one `process` call did: items it finished, by outcome."""

    succeeded: int = 0
    failed: int = 0
    released: int = 0
    pages: int = 0
    done: bool = False
    errors: list[tuple[str, str]] = field(default_factory=list)


def nonce_of(batch_id: str, process_id: str) -> str:
    """The nonce of a batch's event on one instance (the same on every attempt)."""
    digest = hashlib.sha256(f"stateward:batch:{batch_id}:{process_id}".encode()).digest()
    return base64.urlsafe_b64encode(digest[:16]).rstrip(b"=").decode()


def check_params(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The batch's parameters, checked (INVALID_INPUT with a pointer)."""
    if kind not in KINDS:
        raise DomainError(INVALID_INPUT, f"unknown batch kind {kind!r}", pointer="/kind")
    if kind not in BUILDERS:
        raise DomainError(INVALID_INPUT, f"bulk {kind} is not available on this node",
                          pointer="/kind")  # fmt: skip
    out = dict(params)
    if kind == "action":
        action = out.get("action")
        if not isinstance(action, str) or not action or action.startswith("$"):
            raise DomainError(INVALID_INPUT, "action must be an action name", pointer="/action")
        if out.get("input") is not None and not isinstance(out.get("input"), Mapping):
            raise DomainError(INVALID_INPUT, "input must be an object", pointer="/input")
    if kind == "migrate":
        version = out.get("toVersion")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise DomainError(INVALID_INPUT, "toVersion must be a version number",
                              pointer="/toVersion")  # fmt: skip
        if out.get("stateMap") is not None and not isinstance(out.get("stateMap"), Mapping):
            raise DomainError(INVALID_INPUT, "stateMap must be an object", pointer="/stateMap")
    return out


async def _system_admin(uow: Any, actor: str) -> bool:
    """Whether `actor` is an admin of the system namespace (sees and runs every batch)."""
    return ADMIN_ROLE in {r.lower() for r in await uow.grants.roles_of(actor, "system")}


async def operable_namespaces(runtime: Runtime, actor: str, scope: str | None) -> list[str] | None:
    """The namespaces `actor` may run a bulk operation in: `[scope]` when one is named
    (FORBIDDEN without the role there, NOT_FOUND without any role there), else every
    namespace holding instances where it holds admin or operator (None: all of them, for
    a system admin)."""
    namespaces = await queries.instance_namespaces(runtime)
    async with runtime.uow(readonly=True) as uow:
        if scope is not None:
            roles = await uow.grants.roles_of(actor, scope)
            require_operation_role(roles, f"a bulk operation in {scope}")
            return [scope]
        if await _system_admin(uow, actor):
            return None
        found = [
            namespace
            for namespace in namespaces
            if holds_operation_role(await uow.grants.roles_of(actor, namespace))
        ]
    if not found:
        raise DomainError(FORBIDDEN, "a bulk operation needs the role admin or operator",
                          details={"roles": list(OPERATION_ROLES)})  # fmt: skip
    return found


async def create(
    runtime: Runtime,
    actor: str,
    kind: str,
    params: Mapping[str, Any],
    process_ids: Sequence[str],
    filter: Any = None,
) -> BatchRecord:
    """Record a batch over `process_ids` (already limited to what `actor` may operate);
    the workers process it."""
    checked = check_params(kind, params)
    ids = list(dict.fromkeys(process_ids))
    if len(ids) > MAX_INSTANCES:
        raise DomainError(INVALID_INPUT, f"a batch holds at most {MAX_INSTANCES} instances; "
                          "narrow the filter", pointer="/filter")  # fmt: skip
    now = runtime.clock.now()
    record = BatchRecord(
        id=str(uuid.uuid4()), kind=kind, filter=filter if filter is not None else {},
        params=checked, status=RUNNING if ids else COMPLETED, total=len(ids), succeeded=0,
        failed=0, created_by=actor, created_at=now, finished_at=None if ids else now,
    )  # fmt: skip
    async with runtime.uow() as uow:
        await uow.batches.add(record, ids)
        await uow.commit()
    return record


def search_json(search: InstanceSearch) -> dict[str, Any]:
    """The filter as recorded on the batch (`BatchOperation.filter`): set fields only."""
    out: dict[str, Any] = {}
    for key, value in dataclasses.asdict(search).items():
        if value in (None, (), []):
            continue
        if isinstance(value, datetime):
            value = value.isoformat().replace("+00:00", "Z")
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


async def start(
    runtime: Runtime, actor: str, kind: str, params: Mapping[str, Any], search: InstanceSearch
) -> BatchRecord:
    """A batch of `kind` over the instances `search` matches in the namespaces where
    `actor` holds admin or operator (see `operable_namespaces`)."""
    check_params(kind, params)
    scope = search.namespace
    if search.workflow is not None:
        if not is_canonical_path(search.workflow):
            raise DomainError(INVALID_INPUT, f"{search.workflow!r} is not a workflow path",
                              pointer="/filter/workflow")  # fmt: skip
        owner = split_path(search.workflow)[0]
        if scope is not None and scope != owner:
            raise DomainError(NOT_FOUND, "namespace does not exist or is not visible to you")
        scope = owner
    namespaces = await operable_namespaces(runtime, actor, scope)
    async with runtime.uow(readonly=True) as uow:
        ids = await uow.search.instance_ids(search, namespaces=namespaces, limit=MAX_INSTANCES + 1)
    return await create(runtime, actor, kind, params, ids, search_json(search))


async def get(runtime: Runtime, batch_id: str) -> BatchRecord | None:
    """One batch."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.batches.get(batch_id)


async def cancel(runtime: Runtime, actor: str, batch_id: str) -> BatchRecord:
    """Stop a running batch: items not done yet are `skipped` (what was applied stays).
    Its creator or a system admin; another caller gets NOT_FOUND."""
    async with runtime.uow() as uow:
        batch = await uow.batches.get(batch_id)
        admin = await _system_admin(uow, actor)
        if batch is None or (batch.created_by != actor and not admin):
            raise DomainError(NOT_FOUND, "batch operation does not exist or is not visible to you")
        if batch.status != RUNNING:
            raise DomainError(CONFLICT, f"the batch is {batch.status}")
        now = runtime.clock.now()
        await uow.batches.set_status(batch_id, CANCELLED, now)
        await uow.batches.skip_open(batch_id, now)
        await uow.commit()
    await _count(runtime, batch_id)
    found = await get(runtime, batch_id)
    assert found is not None
    return found


async def _build(
    runtime: Runtime, batch: BatchRecord, process: ProcessRecord
) -> tuple[str, dict[str, Any]]:
    """The item's event: the kind's builder; for `retry`, what retryIncident records (the
    instance's open incident and the module its hook runs with now, issue 15)."""
    if batch.kind == "retry":
        async with runtime.uow(readonly=True) as uow:
            return RETRY, await retry_input(runtime, uow, process, None)
    return BUILDERS[batch.kind](batch, process)


async def _signed(runtime: Runtime, batch: BatchRecord, process: ProcessRecord) -> SignedEnvelope:
    name, input = await _build(runtime, batch, process)
    envelope = build_envelope(
        runtime.net, process.id, name, process.workflow, input, SYSTEM_ACTOR,
        runtime.clock.now(), nonce_of(batch.id, process.id),
    )  # fmt: skip
    return sign_envelope(envelope, runtime.node_key)


Outcome = tuple[str, str | None, str | None]


async def _apply(
    runtime: Runtime, batch: BatchRecord, item: BatchItemRecord, process: ProcessRecord | None
) -> Outcome:
    """(status, code, message) of one item's event."""
    if process is None:
        return FAILED, NOT_FOUND, "the instance does not exist"
    try:
        await act(runtime, await _signed(runtime, batch, process), attested=True)
    except DomainError as error:
        if error.code == REPLAYED:  # an earlier attempt of this batch wrote it
            return SUCCEEDED, None, None
        if error.code in _TRANSIENT:
            return PENDING, error.code, error.message[:2000]
        return FAILED, error.code, error.message[:2000]
    return SUCCEEDED, None, None


async def process(
    runtime: Runtime,
    batch_id: str,
    *,
    page: int = PAGE,
    lease: float = LEASE_SECONDS,
    pages: int | None = None,
) -> Progress:
    """Work on one batch until no item is left to claim (or `pages` pages); marks it
    completed when every item is done. Safe on several nodes at once."""
    node = runtime.node_public
    progress = Progress()
    while pages is None or progress.pages < pages:
        now = runtime.clock.now()
        async with runtime.uow() as uow:
            batch = await uow.batches.get(batch_id)
            if batch is None or batch.status != RUNNING:
                progress.done = True
                return progress
            items = await uow.batches.claim(
                batch_id, page, node, now, now - timedelta(seconds=lease)
            )
            await uow.commit()
        if not items:
            break
        progress.pages += 1
        async with runtime.uow(readonly=True) as uow:
            rows = await uow.processes.processes_by_ids(i.process_id for i in items)
        # The page's events go through `act` together: group commit writes them in few
        # transactions (each instance still gets its own signed event).
        outcomes = await asyncio.gather(
            *(_apply(runtime, batch, item, rows.get(item.process_id)) for item in items)
        )
        async with runtime.uow() as uow:
            at = runtime.clock.now()
            for item, (status, code, message) in zip(items, outcomes, strict=True):
                if status == PENDING:  # transient: give it back
                    progress.released += int(await uow.batches.release(item, node))
                    continue
                won = await uow.batches.finish_item(item, status, at, node, code, message)
                if won and status == SUCCEEDED:
                    progress.succeeded += 1
                elif won:
                    progress.failed += 1
                    progress.errors.append((item.process_id, str(code)))
            await uow.commit()
        await _count(runtime, batch_id)
    progress.done = await _finish(runtime, batch_id)
    return progress


async def _count(runtime: Runtime, batch_id: str) -> dict[str, int]:
    async with runtime.uow() as uow:
        counts = await uow.batches.counts(batch_id)
        await uow.batches.update(
            batch_id, succeeded=counts.get(SUCCEEDED, 0), failed=counts.get(FAILED, 0)
        )
        await uow.commit()
    return counts


async def _finish(runtime: Runtime, batch_id: str) -> bool:
    """Completed when no item is pending or claimed; True when the batch is over."""
    counts = await _count(runtime, batch_id)
    if counts.get(PENDING, 0) or counts.get("claimed", 0):
        return False
    async with runtime.uow() as uow:
        await uow.batches.set_status(batch_id, COMPLETED, runtime.clock.now())
        await uow.commit()
    return True


async def process_running(runtime: Runtime, **kw: Any) -> int:
    """`process` every running batch once (a worker's round); how many items it finished."""
    async with runtime.uow(readonly=True) as uow:
        ids = await uow.batches.running()
    done = 0
    for batch_id in ids:
        progress = await process(runtime, batch_id, **kw)
        done += progress.succeeded + progress.failed
    return done


class Worker:
    """A node's background loop over running batches (started by the container)."""

    def __init__(self, runtime: Runtime, interval: float = 0.5) -> None:
        self.runtime = runtime
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="batch-worker")

    async def stop(self) -> None:
        """Stop the loop; claims it held are taken again after their lease."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _loop(self) -> None:
        while True:
            try:
                await process_running(self.runtime)
            except asyncio.CancelledError:
                raise
            except Exception:  # a failing round must not stop the loop
                log.exception("batch worker round failed")
            await asyncio.sleep(self.interval)


OnChange = Callable[[BatchRecord], Awaitable[None]]


async def wait(
    runtime: Runtime, batch_id: str, on_change: OnChange | None = None, *, interval: float = 0.5
) -> BatchRecord:
    """Poll a batch until it is over (calling `on_change` when its counts move)."""
    seen: tuple[Any, ...] = ()
    while True:
        batch = await get(runtime, batch_id)
        if batch is None:
            raise DomainError(NOT_FOUND, "batch operation does not exist")
        now = (batch.status, batch.succeeded, batch.failed)
        if now != seen and on_change is not None:
            await on_change(batch)
        seen = now
        if batch.status != RUNNING:
            return batch
        await asyncio.sleep(interval)


async def listing(
    runtime: Runtime, actor: str, limit: int, before: tuple[datetime, str] | None,
    backward: bool = False,
) -> list[BatchRecord]:  # fmt: skip
    """Batches the actor may see, newest first: its own; every batch for a system admin
    (`backward`: the newer ones than `before`, oldest first, to page backward)."""
    async with runtime.uow(readonly=True) as uow:
        admin = await _system_admin(uow, actor)
        return await uow.batches.page(limit, before, None if admin else actor, backward)


async def visible(runtime: Runtime, actor: str, batch_id: str) -> BatchRecord:
    """The batch when `actor` created it or is a system admin; else NOT_FOUND."""
    async with runtime.uow(readonly=True) as uow:
        batch = await uow.batches.get(batch_id)
        admin = await _system_admin(uow, actor)
    if batch is None or (batch.created_by != actor and not admin):
        raise DomainError(NOT_FOUND, "batch operation does not exist or is not visible to you")
    return batch


async def errors(
    runtime: Runtime, batch_id: str, after: int, limit: int, before: int | None = None,
    backward: bool = False,
) -> list[BatchItemRecord]:  # fmt: skip
    """A page of a batch's failed items (by position; `backward`: below `before`, last
    first)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.batches.errors(batch_id, after, limit, before, backward)


async def count_errors(runtime: Runtime, batch_id: str) -> int:
    """How many of a batch's items failed (`BatchOperation.errors.totalCount`)."""
    async with runtime.uow(readonly=True) as uow:
        return (await uow.batches.counts(batch_id)).get(FAILED, 0)


async def count_listing(runtime: Runtime, actor: str) -> int:
    """How many batches `listing` pages through for `actor` (`totalCount`)."""
    async with runtime.uow(readonly=True) as uow:
        admin = await _system_admin(uow, actor)
        return await uow.batches.count(None if admin else actor)
