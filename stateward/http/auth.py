"""Bearer tokens: where to find them (header, `connection_init` payload) and how to check them.

Checking is delegated to `services.authenticate(token)`; without it there is no viewer.
A token that is presented but malformed or refused is an UNAUTHENTICATED error, never a
silent downgrade to anonymous.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stateward.domain.errors import UNAUTHENTICATED
from stateward.schema.errors import ApiError

BAD_SCHEME = "Authorization must be 'Bearer <token>'"
REFUSED = "invalid or expired token"


def bearer_token(value: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` value; None when absent.

    Raises ApiError(UNAUTHENTICATED) when a value is present but is not a Bearer token.
    """
    if value is None or not value.strip():
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(UNAUTHENTICATED, BAD_SCHEME)
    return token.strip()


def _lookup(mapping: Mapping[str, Any], key: str) -> Any:
    for k, v in mapping.items():
        if isinstance(k, str) and k.lower() == key:
            return v
    return None


def authorization_from_params(params: Mapping[str, Any] | None) -> str | None:
    """The `authorization` value of a `connection_init` payload (key case-insensitive).

    Also looks under a nested `headers` object, as some clients send it that way.
    """
    if not params:
        return None
    value = _lookup(params, "authorization")
    if value is None:
        headers = _lookup(params, "headers")
        if isinstance(headers, Mapping):
            value = _lookup(headers, "authorization")
    if value is not None and not isinstance(value, str):
        raise ApiError(UNAUTHENTICATED, BAD_SCHEME)
    return value


async def authenticate(services: Any, token: str | None) -> Any:
    """The viewer for `token` via `services.authenticate`; None without a token or a hook.

    Raises ApiError(UNAUTHENTICATED) when the hook refuses the token.
    """
    if token is None:
        return None
    hook = getattr(services, "authenticate", None)
    if hook is None:
        return None
    viewer = await hook(token)
    if viewer is None:
        raise ApiError(UNAUTHENTICATED, REFUSED)
    return viewer
