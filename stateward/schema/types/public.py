"""What a visitor with an entry token sees (DESIGN §7): the current step and nothing else."""

from __future__ import annotations

from typing import Any

import strawberry

from stateward.schema.enums import PublicViewStatus
from stateward.schema.scalars import JSON


@strawberry.type
class PublicState:
    """The current step: key, label, 0-based ordinal and the number of states."""

    key: str
    label: str | None
    ordinal: int
    total: int


@strawberry.type
class PublicView:
    """The visitor's view of an instance: current step, its form, the visible data keys."""

    state: PublicState
    form: JSON | None
    data: JSON
    status: PublicViewStatus
    active: bool
    branding: JSON | None

    @classmethod
    def from_domain(cls, view: Any) -> PublicView:
        """From `runtime.public.PublicView`."""
        state = view.state
        return cls(
            state=PublicState(
                key=state.key, label=state.label, ordinal=state.ordinal, total=state.total
            ),
            form=view.form,
            data=dict(view.data or {}),
            status=PublicViewStatus(view.status),
            active=bool(view.active),
            branding=getattr(view, "branding", None),
        )


@strawberry.type
class PublicEntry:
    """A publicly started instance: the visitor's entry token and its first view."""

    token: str
    view: PublicView
