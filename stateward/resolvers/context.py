"""What a resolver reads from `info.context`: the runtime, the viewer, namespace checks."""

from __future__ import annotations

from typing import Any

from strawberry.types import Info

from stateward.domain.errors import UNAUTHENTICATED
from stateward.runtime.access.auth import Viewer
from stateward.runtime.core import policy
from stateward.runtime.core.services import Runtime
from stateward.schema.errors import ApiError


def runtime(info: Info) -> Runtime:
    """The node's `Runtime` (held by the services object the app was built with)."""
    return info.context.services.runtime  # type: ignore[no-any-return]


def services(info: Info) -> Any:
    """The services object (runtime, bus, ...)."""
    return info.context.services


def viewer_or_none(info: Info) -> Viewer | None:
    """The authenticated viewer, or None for an anonymous caller."""
    return info.context.viewer  # type: ignore[no-any-return]


def viewer(info: Info) -> Viewer:
    """The authenticated viewer; UNAUTHENTICATED for anonymous callers."""
    found = info.context.viewer
    if found is None:
        raise ApiError(UNAUTHENTICATED, "authentication required: send a Bearer token")
    return found  # type: ignore[no-any-return]


def require_read(info: Info, namespace: str | None, kind: str = "object") -> Viewer:
    """The viewer, if the read rule (`runtime.policy`) lets it read `namespace`;
    otherwise NOT_FOUND for `kind`, exactly as for an object that does not exist."""
    return policy.require_namespace(viewer(info), namespace, kind)


def client_ip(info: Info) -> str | None:
    """The caller's IP address (per-IP rate limits of public entry)."""
    return info.context.client_ip  # type: ignore[no-any-return]
