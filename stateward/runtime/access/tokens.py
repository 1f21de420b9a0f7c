"""API tokens for the CLI (`stateward token`): create one for an actor, resolve one.

Thin over `runtime.auth` (one token scheme: `sw_` + 32 random bytes base64url, only the
sha256 stored in `api_tokens`): the CLI holds the actor's key file, so no viewer check.
"""

from __future__ import annotations

from datetime import timedelta

from stateward.records import ApiTokenRecord
from stateward.runtime.access.auth import authenticate, new_token, token_hash, token_ttl
from stateward.runtime.core.policy import not_found
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


async def list_api_tokens(runtime: Runtime, actor: str) -> list[ApiTokenRecord]:
    """`actor`'s tokens, newest first (records hold the sha256 only, never a secret)."""
    async with runtime.uow(readonly=True) as uow:
        return await uow.tokens.of_actor(actor)


async def revoke_api_token(runtime: Runtime, actor: str, token_id: str) -> ApiTokenRecord:
    """Revoke `actor`'s token `token_id` (its sha256); it stops authenticating at once.
    Another actor's token or an unknown id: NOT_FOUND (the same answer). Revoking a
    revoked token changes nothing and answers it as it is."""
    now = runtime.clock.now()
    async with runtime.uow() as uow:
        found = await uow.tokens.get(token_id)
        if found is None or found.actor != actor:
            raise not_found("token")
        await uow.tokens.revoke(token_id, now)
        after = await uow.tokens.get(token_id)
        await uow.commit()
    assert after is not None
    return after


async def authenticate_token(runtime: Runtime, token: str) -> str | None:
    """The actor a bearer token stands for, or None (unknown, expired, revoked key)."""
    if not token:
        return None
    viewer = await authenticate(runtime, token)
    return None if viewer is None else viewer.actor
