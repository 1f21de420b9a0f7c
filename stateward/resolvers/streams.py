"""Subscription resolvers: live §9 events from the node's bus, resumable by cursor.

Resume without gap or duplicate: subscribe to the bus FIRST (so nothing published from
now on is missed), then replay the outbox backlog after the client's cursor, then pass
live items through, dropping every id at or below the last one replayed. A subscriber
only ever sees namespaces where it holds a role.

The backlog is read in pages of `REPLAY_PAGE` rows, and each row is let go once it is
sent, so a replay holds at most one page: memory is bounded by page size x subscribers,
whatever the backlog (500 concurrent `after: "0"` replays of 500-row pages pinned ~800 MB).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from strawberry.types import Info

from stateward.domain import events as ev
from stateward.domain.access import ADMIN_ROLE
from stateward.domain.errors import FORBIDDEN, INVALID_INPUT, DomainError
from stateward.records import OutboxFilter, ProcessRecord
from stateward.resolvers.context import require_read, runtime, services, viewer
from stateward.resolvers.ids import local_id
from stateward.resolvers.loaders import Loaders
from stateward.runtime.access import auth
from stateward.runtime.access.auth import Viewer
from stateward.runtime.core import policy, queries

REPLAY_PAGE = 50
QUEUE_SIZE = 1000
REGISTRY_PREFIX = "registry."
#: Longest a subscription serves deliveries from grants read earlier (seconds).
REFRESH_AFTER = 5.0
QUEUE_TYPES = (
    ev.WORKFLOW_ASSIGNED, ev.WORKFLOW_CLAIMED, ev.WORKFLOW_UNCLAIMED,
    ev.ASSIGNMENT_COMPLETED, ev.ASSIGNMENT_CANCELLED, ev.SLA_WARNING, ev.SLA_BREACHED,
)  # fmt: skip
Payload = Mapping[str, Any]


class Direct(Protocol):
    """Sends a live payload's frame to the subscriber itself (True), or declines (False:
    the payload is yielded and Strawberry sends it). `schema.base.LiveOperation`."""

    async def send(self, payload: Payload) -> bool:
        """Send now or after the socket drains; False to decline."""

    def send_now(self, payload: Payload) -> bool:
        """Send at once without waiting (from the fan-out loop); False when it can't."""


@dataclass(frozen=True)
class StreamFilter:
    """What a subscriber asked for (empty/None = any) plus what it may see."""

    types: tuple[str, ...] = ()
    namespace: str | None = None
    workflow: str | None = None
    instance: str | None = None
    team: str | None = None

    def outbox(self) -> OutboxFilter:
        """The same filter for the outbox backlog query."""
        return OutboxFilter(self.types, self.namespace, self.workflow, self.instance, self.team)

    def matches(self, payload: Payload) -> bool:
        """True when a live payload passes every given criterion."""
        return (
            (not self.types or payload.get("type") in self.types)
            and (self.namespace is None or payload.get("namespace") == self.namespace)
            and (self.workflow is None or payload.get("workflow") == self.workflow)
            and (self.instance is None or payload.get("instanceId") == self.instance)
            and (self.team is None or payload.get("team") == self.team)
        )


def make_filter(
    types: Sequence[str] | None = None, namespace: str | None = None,
    workflow: str | None = None, instance: str | None = None, team: str | None = None,
) -> StreamFilter:  # fmt: skip
    """A checked `StreamFilter` (unknown event types are INVALID_INPUT)."""
    unknown = [t for t in types or () if not ev.is_known(t)]
    if unknown:
        raise DomainError(INVALID_INPUT, f"unknown event type {unknown[0]!r}",
                          pointer="/filter/types")  # fmt: skip
    pid = local_id(instance, "Instance") if instance else None
    return StreamFilter(tuple(types or ()), namespace, workflow, pid, team)


class LiveViewer:
    """The subscriber's viewer, re-read after registry events (issue 10: revocation is
    prompt). Every delivery is checked against the current grants; they are cached and
    read again once a `registry.*` event (grant, revoke) has passed, and at most every
    `REFRESH_AFTER` seconds otherwise (a key revocation publishes no bus event)."""

    def __init__(self, info: Info, viewer: Viewer) -> None:
        self.runtime = runtime(info)
        self.viewer: Viewer | None = viewer
        self.stale_since: float | None = None
        self.read_at = time.monotonic()
        #: `allowed` per namespace for `viewer` as it is now (`may_receive`).
        self.classes: dict[Any, bool] = {}
        self.classes_of: Viewer | None = viewer

    def saw(self, payload: Payload) -> None:
        """Note a bus event; registry events invalidate the cached grants."""
        if self.stale_since is None and str(payload.get("type", "")).startswith(REGISTRY_PREFIX):
            self.stale_since = time.monotonic()

    async def current(self) -> Viewer | None:
        """The viewer as of now (None once its key is revoked). The read is shared with
        the actor's other subscriptions on this node (`auth.SharedGrantReads`): one that
        started after the registry event was seen, or within `REFRESH_AFTER`."""
        now = time.monotonic()
        if self.viewer is not None and (
            self.stale_since is not None or now - self.read_at > REFRESH_AFTER
        ):
            not_before = self.stale_since if self.stale_since is not None else now - REFRESH_AFTER
            self.stale_since = None
            self.viewer, self.read_at = await auth.shared_grant_reads(self.runtime).read(
                self.viewer, not_before
            )
        return self.viewer

    def ready(self) -> bool:
        """True when the grants are current without waiting (the fan-out's path): read
        recently enough, or refreshed now from a completed read shared with the actor's
        other subscriptions (`SharedGrantReads.ready`). Past half of `REFRESH_AFTER` a
        newer shared read is started in the background, so subscriptions of one actor
        move to it together instead of each waiting for a read when its own expires; after
        a registry event, until a read started since then has completed, False (the
        subscriber's task then waits for it, in order)."""
        viewer = self.viewer
        if viewer is None:
            return True
        now = time.monotonic()
        stale = self.stale_since
        if stale is None and now - self.read_at <= REFRESH_AFTER / 2:
            return True
        not_before = stale if stale is not None else now - REFRESH_AFTER / 2
        got = auth.shared_grant_reads(self.runtime).ready(viewer, not_before)
        if got is not None:
            self.stale_since = None
            self.viewer, self.read_at = got
            return True
        return stale is None and now - self.read_at <= REFRESH_AFTER

    def may_receive(
        self, me: Viewer | None, allowed: Callable[[Viewer | None, Payload], bool], payload: Payload
    ) -> bool:
        """`allowed(me, payload)` remembered per namespace — the payload's visibility class
        — for as long as the grants stay those of `me` (a re-read gives a new viewer and
        clears the memo). `allowed` must depend on the payload only through its namespace."""
        if me is not self.classes_of:
            self.classes, self.classes_of = {}, me
        namespace = payload.get("namespace")
        hit = self.classes.get(namespace)
        if hit is None:
            hit = self.classes[namespace] = allowed(me, payload)
        return hit


async def stream(
    info: Info,
    where: StreamFilter,
    after: int | None,
    allowed: Callable[[Viewer | None, Payload], bool] = policy.can_read_payload,
    direct: Direct | None = None,
) -> AsyncGenerator[Payload]:
    """Payloads matching `where` that the viewer may read (`allowed`, checked per delivery
    with grants kept current): backlog after `after`, then live. A live payload the
    viewer may read is first offered to `direct` (the websocket's encode-once path,
    `schema.base.LiveOperation`) and yielded only when it declines.

    With `direct`, once the backlog is replayed a live payload may also be handled in the
    fan-out loop itself while this generator waits for the next one (`take_now`): the
    same checks as below, in the same order, without waking this subscriber's task.
    `allowed` then is remembered per namespace (the visibility class) for each reading of
    the grants; without `direct` it is asked per delivery (it may raise)."""
    live = LiveViewer(info, viewer(info))
    bus = services(info).bus
    registry_event = REGISTRY_PREFIX
    sub = bus.subscribe(
        lambda p: where.matches(p) or str(p.get("type", "")).startswith(registry_event),
        QUEUE_SIZE,
    )
    try:
        last = -1
        if after is not None:
            last = after
            while True:
                rows = deque(
                    await queries.outbox_after(runtime(info), last, where.outbox(), REPLAY_PAGE)
                )
                full = len(rows) == REPLAY_PAGE
                while rows:
                    row = rows.popleft()
                    last = row.id
                    message = row.message()
                    del row
                    if allowed(await live.current(), message):
                        yield message
                    del message
                if not full:
                    break
        if direct is not None:
            sub.take_now(_taker(live, where, last, allowed, direct))
        async for payload in sub:
            live.saw(payload)
            if int(payload.get("id", 0)) <= last or not where.matches(payload):
                continue
            me = await live.current()
            if direct is None:
                if allowed(me, payload):
                    yield payload
            elif live.may_receive(me, allowed, payload) and not await direct.send(payload):
                yield payload
    finally:
        sub.close()


def _taker(
    live: LiveViewer,
    where: StreamFilter,
    last: int,
    allowed: Callable[[Viewer | None, Payload], bool],
    direct: Direct,
) -> Callable[[Payload], bool]:
    """The live loop of `stream` as one synchronous step for the fan-out (`take_now`):
    handled (True) when skipped or sent; False — queue it, the loop does the rest — when
    the grants must be read again or the frame can't be written at once."""

    def take(payload: Payload) -> bool:
        live.saw(payload)
        if int(payload.get("id", 0)) <= last or not where.matches(payload):
            return True
        if not live.ready():
            return False
        if not live.may_receive(live.viewer, allowed, payload):
            return True
        return direct.send_now(payload)

    return take


async def events(
    info: Info, where: StreamFilter, after: str | None, direct: Direct | None = None
) -> AsyncGenerator[Payload]:
    """`Subscription.events(filter, after)`."""
    cursor = None
    if after is not None:
        if not after.isdigit():
            raise DomainError(INVALID_INPUT, "after must be an event cursor (an integer id)",
                              pointer="/after")  # fmt: skip
        cursor = int(after)
    if where.namespace is not None:
        require_read(info, where.namespace, "namespace")
    async for payload in stream(info, where, cursor, direct=direct):
        yield payload


async def instance_updated(info: Info, ident: str) -> AsyncGenerator[ProcessRecord]:
    """`Subscription.instanceUpdated(id)`: the instance as it is after each of its events;
    ends with NOT_FOUND once the viewer may no longer read it."""
    pid = local_id(ident, "Instance")
    rt = runtime(info)
    record = policy.readable_process(viewer(info), await queries.get_process(rt, pid))
    namespace = record.namespace

    def readable(me: Viewer | None, payload: Payload) -> bool:
        if not policy.can_read(me, namespace):
            raise policy.not_found("instance")
        return True

    # One event of the log may publish several bus messages (action, transition,
    # assignment...), all with its `seq`: each log position is sent once.
    sent = record.seq
    async for payload in stream(info, StreamFilter(instance=pid), None, readable):
        seq = payload.get("seq")
        if isinstance(seq, int) and seq <= sent:
            continue
        fresh = await queries.get_process(rt, pid)
        if fresh is None or fresh.seq <= sent:
            continue
        sent = fresh.seq
        info.context.loaders["graph"] = Loaders(rt)  # nested fields must not read stale rows
        yield fresh


async def assignment_queue(
    info: Info, team: str, direct: Direct | None = None
) -> AsyncGenerator[Payload]:
    """`Subscription.assignmentQueue(team)`: assignment and SLA events of one team, in
    the namespaces where the viewer holds that team's role or `admin` (the rule of
    `assignments(team)`), checked per delivery."""
    me = viewer(info)
    wanted = {team.lower(), ADMIN_ROLE}
    if not any(g.role.lower() in wanted for g in me.grants):
        raise DomainError(FORBIDDEN, "only members of the team (or admins) may watch its queue")

    def allowed(current: Viewer | None, payload: Payload) -> bool:
        return policy.watches_team(current, team, payload.get("namespace"))

    where = StreamFilter(types=QUEUE_TYPES, team=team)
    async for payload in stream(info, where, None, allowed, direct):
        yield payload
