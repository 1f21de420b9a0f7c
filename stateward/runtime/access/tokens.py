"""API tokens for the CLI (`stateward token`): create one for an actor, resolve one.

Thin over `runtime.auth` (one token scheme: `sw_` + 32 random bytes base64url, only the
sha256 stored in `api_tokens`): the CLI holds the actor's key file, so no viewer check.
"""

from __future__ import annotations

from datetime import timedelta

from stateward.records import ApiTokenRecord
from stateward.runtime.access.auth import authenticate, new_token, token_hash, token_ttl
from stateward.runtime.core.services import Runtime


async def create_api_token(
    runtime: Runtime, actor: str, label: str | None = None, ttl: float | None = None
) -> tuple[str, ApiTokenRecord]:
    """A new token for `actor` (valid `ttl` seconds, the deployment's default token TTL
    when None) and its record. The token itself is returned once and never stored.
    """
    seconds = token_ttl(runtime, ttl)
    token = new_token()
    now = runtime.clock.now()
    expires = now + timedelta(seconds=seconds)
    async with runtime.uow() as uow:
        record = await uow.tokens.add(
            token_hash(token), actor, now, label=label, expires_at=expires
        )
        await uow.commit()
    return token, record


async def authenticate_token(runtime: Runtime, token: str) -> str | None:
    """The actor a bearer token stands for, or None (unknown, expired, revoked key)."""
    if not token:
        return None
    viewer = await authenticate(runtime, token)
    return None if viewer is None else viewer.actor
