"""Notifications (DESIGN §7): messages for an actor or a whole team, e.g. an SLA breach.

A notification is addressed to an actor id or to `team:<role>`; the viewer's list holds
its own and those of every team (role) it holds in the notification's namespace or a
namespace above it (`system` grants: everywhere). Notifications are written inside the
transaction of the event that causes them (`notify`), never on their own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.events import NOTIFICATION_KINDS
from stateward.persistence import UnitOfWork
from stateward.persistence.notify import team_recipient
from stateward.records import NotificationRecord
from stateward.runtime.core.ops_support import actor_id, kernel_repo
from stateward.runtime.core.services import Runtime

MAX_FIRST = 100


def recipient_for(assignee: str | None, team: str | None, fallback: str | None) -> str | None:
    """Who hears about a process: its assignee when claimed, else its team (`team:<t>`),
    else `fallback` (e.g. the actor who started it)."""
    if assignee:
        return assignee
    if team:
        return team_recipient(team.lower())
    return fallback


async def notify(
    uow: UnitOfWork,
    recipient: str,
    namespace: str,
    kind: str,
    payload: Any,
    now: datetime,
    process_id: str | None = None,
) -> NotificationRecord:
    """Store a notification in `uow` (the causing event's transaction).

    `kind` must be one of `NOTIFICATION_KINDS`: a stored kind the API cannot name would
    break every later read of the recipient's list, so a wrong one fails here, at once."""
    if kind not in NOTIFICATION_KINDS:
        raise ValueError(f"unknown notification kind {kind!r}")
    return await uow.notifications.add(
        recipient, namespace, kind, payload, now, process_id=process_id
    )


async def list_notifications(
    runtime: Runtime, viewer: Any, first: int = 50, before: int | None = None,
    unread_only: bool = False, newer_than: int | None = None,
) -> list[NotificationRecord]:  # fmt: skip
    """The viewer's notifications and its teams', newest first (`before`: an id to page
    below; `newer_than`: the ones above an id, oldest first, to page backward)."""
    if first < 0 or first > MAX_FIRST:
        raise DomainError(INVALID_INPUT, f"first must be between 0 and {MAX_FIRST}",
                          pointer="/first")  # fmt: skip
    who = actor_id(viewer)
    async with runtime.uow(readonly=True) as uow:
        teams = await _teams(uow, who)
        return await kernel_repo(uow).notifications_for(
            who,
            teams,
            before_id=before,
            limit=first,
            unread_only=unread_only,
            newer_than=newer_than,
        )


async def _teams(uow: UnitOfWork, who: str) -> list[tuple[str, str]]:
    grants = await uow.grants.of_actor(who)
    return sorted({(g.namespace, g.role.lower()) for g in grants})


async def count_notifications(runtime: Runtime, viewer: Any, unread_only: bool = False) -> int:
    """How many notifications the viewer's list holds (`unreadCount` with `unread_only`)."""
    who = actor_id(viewer)
    async with runtime.uow(readonly=True) as uow:
        teams = await _teams(uow, who)
        return await kernel_repo(uow).count_notifications(who, teams, unread_only=unread_only)


MAX_MARK = 100


async def mark_notifications_read(runtime: Runtime, viewer: Any, ids: list[int]) -> list[int]:
    """Mark the viewer's (and its teams') unread notifications among `ids` read; the ids
    marked. Others' ids, unknown ids and ones already read are skipped alike. A read
    mark is the reader's bookkeeping, not a change of any process: no event is logged."""
    if len(ids) > MAX_MARK:
        raise DomainError(INVALID_INPUT, f"at most {MAX_MARK} ids at once", pointer="/ids")
    who = actor_id(viewer)
    async with runtime.uow() as uow:
        teams = await _teams(uow, who)
        marked = await kernel_repo(uow).mark_notifications_read(
            ids, who, teams, runtime.clock.now()
        )
        await uow.commit()
    return marked
