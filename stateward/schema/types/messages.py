"""Message correlation types (issue 15)."""

from __future__ import annotations

from datetime import datetime

import strawberry

from stateward.resolvers.messages import Published
from stateward.schema.types.instance import Instance


@strawberry.type(description="What `publishMessage` did.")
class MessagePublication:
    """A published message and the instances it reached."""

    message_id: str = strawberry.field(description="The messageId given, or the one made.")
    name: str
    namespace: str
    correlation_key: str
    duplicate: bool = strawberry.field(
        description="True when this messageId was published before: the first publication."
    )
    expires_at: datetime = strawberry.field(
        description="Until then instances that arrive in a waiting state still get it."
    )
    delivered: list[Instance] = strawberry.field(
        description="Instances the message's action was performed on (so far)."
    )
    started: list[Instance] = strawberry.field(
        description="Instances of workflows whose `start.message` is this message."
    )

    @classmethod
    def from_result(cls, result: Published) -> MessagePublication:
        """From the resolver's `Published`."""
        message = result.message
        return cls(
            message_id=message.message_id, name=message.name, namespace=message.namespace,
            correlation_key=message.correlation_key, duplicate=result.duplicate,
            expires_at=message.expires_at,
            delivered=[Instance.from_record(r) for r in result.delivered],
            started=[Instance.from_record(r) for r in result.started],
        )  # fmt: skip
