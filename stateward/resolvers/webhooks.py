"""Webhook resolvers: the deliveries of a namespace's webhook, for its admins only.

Reading them needs `admin` in the namespace (a grant there, on a prefix, or in `system`).
A viewer without any role there gets NOT_FOUND like every other read outside its
namespaces; a member without `admin` gets FORBIDDEN.
"""

from __future__ import annotations

from strawberry.types import Info

from stateward.domain.errors import FORBIDDEN, INVALID_INPUT, DomainError
from stateward.domain.paths import is_namespace
from stateward.records import DeliveryRecord
from stateward.resolvers.context import require_read, runtime
from stateward.resolvers.paging import Page, Window, decode_cursor, id_mark, mirrored_page, page_of
from stateward.runtime.access.auth import ADMIN
from stateward.runtime.sweeps import webhooks

STATUSES = ("pending", "delivered", "failed")


def _before(after: str | None) -> int | None:
    if after is None:
        return None
    values = decode_cursor(after)
    if not values or not isinstance(values[0], int):
        raise DomainError(INVALID_INPUT, "invalid cursor", pointer="/after")
    return values[0]


async def webhook_deliveries(
    info: Info, namespace: str, status: str | None, first: int | None, after: str | None,
    last: int | None = None, before: str | None = None,
) -> Page[DeliveryRecord]:  # fmt: skip
    """`Query.webhookDeliveries(namespace, status)`: newest first, admins of it only;
    paged both ways (cursors `[id]`: `before` pages to the newer ones)."""
    if not is_namespace(namespace):
        raise DomainError(INVALID_INPUT, f"{namespace!r} is not a namespace", pointer="/namespace")
    if status is not None and status not in STATUSES:
        raise DomainError(INVALID_INPUT, f"status must be one of {', '.join(STATUSES)}",
                          pointer="/status")  # fmt: skip
    me = require_read(info, namespace, "namespace")
    if ADMIN not in me.roles_in(namespace):
        raise DomainError(FORBIDDEN, f"only an admin of {namespace} sees its webhook deliveries")
    window = Window.of(first, after, last, before)
    rt = runtime(info)

    async def total() -> int:
        return await webhooks.count_deliveries(rt, namespace, status=status)

    if window.backward:
        newer = id_mark(window)
        rows = await webhooks.list_deliveries(
            runtime(info), namespace, window.limit + 1, status=status,
            newer_than=0 if newer is None else newer,
        )  # fmt: skip
        return mirrored_page(window, rows, key=lambda d: (d.id,)).counted(total)
    limit, older = window.limit, _before(after)
    rows = await webhooks.list_deliveries(
        runtime(info), namespace, limit + 1, status=status, before_id=older
    )
    page = page_of(rows, limit, key=lambda d: (d.id,), has_previous=older is not None)
    return page.counted(total)
