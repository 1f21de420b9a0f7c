"""Delegated-task resolvers (issue 13): list, lock and complete, each one runtime call."""

from __future__ import annotations

from typing import Any

from strawberry.types import Info

from stateward.resolvers.context import client_ip, runtime, viewer
from stateward.resolvers.ids import local_id
from stateward.resolvers.paging import Page, Window, mirrored_page, page_of, time_mark
from stateward.runtime.core.act import ActResult
from stateward.runtime.delegated import tasks
from stateward.runtime.delegated.tasks import DelegatedTask, LockedTask


async def delegated_tasks(
    info: Info, surface: str | None, namespace: str | None, available_only: bool,
    first: int | None, after: str | None, last: int | None = None, before: str | None = None,
) -> Page[DelegatedTask]:  # fmt: skip
    """`Query.delegatedTasks`: open tasks the viewer may work on, oldest first, paged
    both ways (cursors `[created_at, id]`)."""
    window = Window.of(first, after, last, before)
    rt, me = runtime(info), viewer(info)

    async def total() -> int:
        return await tasks.count_delegated_tasks(
            rt, me, surface=surface, namespace=namespace, available_only=available_only
        )

    if window.backward:
        rows = await tasks.delegated_tasks(
            runtime(info), viewer(info), surface=surface, namespace=namespace,
            available_only=available_only, after=time_mark(window),
            limit=window.limit + 1, backward=True,
        )  # fmt: skip
        return mirrored_page(window, rows, key=_task_key).counted(total)
    limit = window.limit
    rows = await tasks.delegated_tasks(
        runtime(info), viewer(info), surface=surface, namespace=namespace,
        available_only=available_only, after=time_mark(window), limit=limit + 1,
    )  # fmt: skip
    page = page_of(rows, limit, key=_task_key, has_previous=after is not None)
    return page.counted(total)


def _task_key(t: DelegatedTask) -> tuple[str, str]:
    return (t.task.created_at.isoformat(), t.task.id)


async def lock_delegated_task(info: Info, ident: str, seconds: int) -> LockedTask:
    """`lockDelegatedTask(id, seconds)`."""
    task = local_id(ident, "DelegatedTask")
    return await tasks.lock_task(runtime(info), viewer(info), task, seconds)


async def complete_delegated_task(
    info: Info, token: str, action: str | None, input: Any
) -> ActResult:
    """`completeDelegatedTask(token, action, input)`: needs the callback token only (its
    failed lookups are limited per client IP)."""
    return await tasks.complete_task(
        runtime(info), token, action, input or {}, client=client_ip(info)
    )
