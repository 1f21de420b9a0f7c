"""The `JSON` scalar as schema modules annotate it.

At run time this is Strawberry's `JSON` scalar (from `base`); for mypy it is `Any`, since
the scalar is a `NewType` over `object` that plain dicts and lists do not type-check as.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    JSON = Any
else:
    from stateward.schema.base import JSON

__all__ = ["JSON"]
