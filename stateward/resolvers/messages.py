"""Message correlation (issue 15): `publishMessage` — thin glue over
`runtime.messages.correlate`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strawberry.types import Info

from stateward.records import MessageRecord, ProcessRecord
from stateward.resolvers.context import runtime, viewer
from stateward.runtime.core import policy
from stateward.runtime.messages import correlate


@dataclass(frozen=True)
class Published:
    """A publication with the instances it reached and started (readable ones)."""

    message: MessageRecord
    duplicate: bool
    delivered: list[ProcessRecord]
    started: list[ProcessRecord]


async def publish_message(
    info: Info,
    namespace: str,
    name: str,
    correlation_key: str,
    payload: Any,
    ttl_seconds: int,
    message_id: str | None,
) -> Published:
    """`publishMessage(...)`: admin or operator of `namespace` (see docs/decisions.md)."""
    me = viewer(info)
    rt = runtime(info)
    result = await correlate.publish(
        rt, me.actor, namespace, name, correlation_key, payload,
        ttl_seconds=ttl_seconds, message_id=message_id,
    )  # fmt: skip
    delivered = await correlate.instances(rt, result.delivered)
    started = await correlate.instances(rt, result.started)
    return Published(
        message=result.message,
        duplicate=result.duplicate,
        delivered=[r for r in delivered if policy.visible_process(me, r)],
        started=[r for r in started if policy.visible_process(me, r)],
    )
