"""Who is calling: challenge-response login, bearer tokens and the request's `Viewer`.

- `auth_challenge(runtime, public_key)`: a single-use challenge string (120 s) stored in
  `auth_challenges`; it names the deployment's `net` so it is worthless elsewhere.
- `auth_login(runtime, public_key, challenge, signature)`: Ed25519 over the challenge's
  UTF-8 bytes; consumes the challenge and issues a session token (stored as sha256 in
  `api_tokens` with label `session`).
- `create_api_token(runtime, viewer, label, actor, ttl)`: a long-lived token; a user makes
  one for itself, a system `admin` for any actor.
- `authenticate(runtime, token)`: the `Viewer` (actor + role grants) or None; a token
  of a revoked OR rotated key no longer authenticates (a rotated key's tokens would
  otherwise keep the old key's session alive after the grants moved on).

API tokens expire: `settings.token_ttl` (STATEWARD_TOKEN_TTL, 30 days) unless a shorter or
longer `ttl` is asked for, never beyond `MAX_TOKEN_TTL` (one year).

Tokens are 32 random bytes (base64url, prefix `sw_`); only their sha256 is stored.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from stateward.domain.canonical import sha256_hex
from stateward.domain.errors import (
    BAD_SIGNATURE,
    FORBIDDEN,
    INVALID_INPUT,
    UNAUTHENTICATED,
    DomainError,
)
from stateward.governance.keys import b64url_encode, is_public_key, verify_signature
from stateward.governance.roles import namespace_scopes
from stateward.persistence import UnitOfWork
from stateward.persistence.retry import read_retrying
from stateward.records import GrantRecord

if TYPE_CHECKING:
    from stateward.runtime.core.services import Runtime

CHALLENGE_TTL = timedelta(seconds=120)
SESSION_TTL = timedelta(hours=12)
SESSION_LABEL = "session"
MAX_TOKEN_TTL = 365 * 24 * 3600.0
TOKEN_PREFIX = "sw_"
SYSTEM_NAMESPACE = "system"
ADMIN = "admin"


@dataclass(frozen=True)
class Viewer:
    """The authenticated caller: an actor key and the role grants it holds everywhere."""

    actor: str
    grants: tuple[GrantRecord, ...] = ()
    label: str | None = None
    expires_at: datetime | None = None

    @property
    def id(self) -> str:
        """The actor id (its public key)."""
        return self.actor

    def roles_in(self, namespace: str) -> frozenset[str]:
        """Lower-case roles in `namespace` (grants of `system` and of every prefix)."""
        scopes = namespace_scopes(namespace)
        return frozenset(g.role.lower() for g in self.grants if g.namespace in scopes)

    def can_read(self, namespace: str | None) -> bool:
        """The read rule of `runtime.policy` (any role that applies in `namespace`)."""
        from stateward.runtime.core.policy import can_read

        return can_read(self, namespace)

    @property
    def is_admin(self) -> bool:
        """True for a `system` admin (may act for, and read, everything)."""
        return ADMIN in self.roles_in(SYSTEM_NAMESPACE)

    def readable(self, namespaces: list[str]) -> list[str]:
        """The subset of `namespaces` the viewer may read, in the given order."""
        return [n for n in namespaces if self.can_read(n)]


def token_hash(token: str) -> str:
    """The stored form of a bearer token (sha256 hex)."""
    return sha256_hex(token.encode("utf-8"))


def new_token() -> str:
    """A fresh bearer token: 32 random bytes, base64url, with a recognisable prefix."""
    return TOKEN_PREFIX + b64url_encode(secrets.token_bytes(32))


def _check_key(public_key: str) -> None:
    if not is_public_key(public_key):
        raise DomainError(
            INVALID_INPUT, "publicKey must be 32 bytes of unpadded base64url", pointer="/publicKey"
        )


async def auth_challenge(runtime: Runtime, public_key: str) -> tuple[str, datetime]:
    """Issue a single-use login challenge for `public_key`; returns (challenge, expires_at)."""
    _check_key(public_key)
    now = runtime.clock.now()
    challenge = f"stateward-login:{runtime.net}:{b64url_encode(secrets.token_bytes(32))}"
    expires = now + CHALLENGE_TTL
    async with runtime.uow() as uow:
        await uow.tokens.purge_challenges(now)
        await uow.tokens.add_challenge(challenge, public_key, expires, now)
        await uow.commit()
    return challenge, expires


async def auth_login(
    runtime: Runtime, public_key: str, challenge: str, signature: str
) -> tuple[str, str, datetime]:
    """Check the signed challenge and open a session: (token, actor, expires_at).

    BAD_SIGNATURE when the signature does not verify; UNAUTHENTICATED when the challenge
    is unknown, expired, already used, issued to another key, or the key is revoked.
    """
    _check_key(public_key)
    if not verify_signature(public_key, challenge.encode("utf-8"), signature):
        raise DomainError(BAD_SIGNATURE, "the signature does not verify for this key and challenge",
                          details={"reason": "forged"})  # fmt: skip
    now = runtime.clock.now()
    token = new_token()
    expires = now + SESSION_TTL
    async with runtime.uow() as uow:
        if not await uow.tokens.consume_challenge(challenge, public_key, now):
            raise DomainError(UNAUTHENTICATED, "unknown, expired or already used challenge")
        await _check_not_revoked(uow, public_key)
        await uow.tokens.add(token_hash(token), public_key, now, label=SESSION_LABEL,
                             expires_at=expires)  # fmt: skip
        await uow.commit()
    return token, public_key, expires


async def create_api_token(
    runtime: Runtime,
    viewer: Viewer,
    *,
    label: str | None = None,
    actor: str | None = None,
    ttl_seconds: float | None = None,
) -> tuple[str, str | None, datetime | None]:
    """A new API token for `actor` (default: the viewer): (token, label, expires_at).

    Only a `system` admin may create a token for another actor (FORBIDDEN otherwise).
    """
    target = actor or viewer.actor
    if target != viewer.actor and not viewer.is_admin:
        raise DomainError(FORBIDDEN, "only a system admin may create tokens for another actor")
    if target != viewer.actor:
        _check_key(target)
    ttl = token_ttl(runtime, ttl_seconds)
    if label is not None and len(label) > 200:
        raise DomainError(INVALID_INPUT, "label is limited to 200 characters", pointer="/label")
    now = runtime.clock.now()
    expires = now + timedelta(seconds=ttl)
    token = new_token()
    async with runtime.uow() as uow:
        await uow.tokens.add(token_hash(token), target, now, label=label, expires_at=expires)
        await uow.commit()
    return token, label, expires


def token_ttl(runtime: Runtime, ttl_seconds: float | None) -> float:
    """The lifetime of a new API token: `ttl_seconds`, or the deployment's default.

    INVALID_INPUT for a non-positive or non-finite value or one beyond `MAX_TOKEN_TTL`
    (so `ttlSeconds: 1e12` is a clear refusal, not a date overflow).
    """
    if ttl_seconds is None:
        return float(getattr(runtime.settings, "token_ttl", 30 * 24 * 3600.0))
    if not 0 < ttl_seconds <= MAX_TOKEN_TTL:  # also false for NaN
        raise DomainError(
            INVALID_INPUT,
            f"ttl must be between 0 and {int(MAX_TOKEN_TTL)} seconds (one year)",
            pointer="/ttl",
        )
    return float(ttl_seconds)


async def authenticate(runtime: Runtime, token: str) -> Viewer | None:
    """The viewer a bearer token stands for, or None (unknown, expired, revoked or rotated
    key)."""
    now = runtime.clock.now()

    async def read() -> Viewer | None:
        async with runtime.uow(readonly=True) as uow:
            record = await uow.tokens.get(token_hash(token))
            if record is None or not record.valid_at(now):
                return None
            return await _viewer_of(uow, record.actor, record.label, record.expires_at)

    return await read_retrying(read, what="token check")


async def refresh_viewer(runtime: Runtime, viewer: Viewer) -> Viewer | None:
    """`viewer` with its grants read again (None once its key is revoked): long-lived
    subscriptions call it after a registry event, so a revoked role stops deliveries.
    A transient database fault is retried; a lasting one is UNAVAILABLE (one failed read
    is shared by every subscription of the actor: it must not end them all with a driver
    error, issue 11)."""

    async def read() -> Viewer | None:
        async with runtime.uow(readonly=True) as uow:
            return await _viewer_of(uow, viewer.actor, viewer.label, viewer.expires_at)

    return await read_retrying(read, what="grant refresh")


class SharedGrantReads:
    """`refresh_viewer` shared by every live subscription of an actor on this node.

    A subscription re-reads its grants after a registry event and every few seconds; with
    many subscriptions of one actor each did its own read (1,000 subscribers: 200 reads a
    second at rest, 1,000 after each grant). `read(viewer, not_before)` reuses a read of
    the same actor that STARTED at or after `not_before` (so it reflects every registry
    event seen before then), or starts one that all waiters share.
    """

    LIMIT = 10_000

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.reads: dict[str, tuple[float, asyncio.Future[Viewer | None]]] = {}

    async def read(self, viewer: Viewer, not_before: float) -> tuple[Viewer | None, float]:
        """(`viewer` with current grants or None once revoked, when that read started)."""
        entry = self.reads.get(viewer.actor)
        if (
            entry is None
            or entry[0] < not_before
            or (entry[1].done() and entry[1].exception() is not None)
        ):
            if len(self.reads) >= self.LIMIT:
                self.reads.clear()
            started = time.monotonic()
            future = asyncio.ensure_future(refresh_viewer(self.runtime, Viewer(viewer.actor)))
            entry = self.reads[viewer.actor] = (started, future)
        fresh = await asyncio.shield(entry[1])
        if fresh is None:
            return None, entry[0]
        return Viewer(viewer.actor, fresh.grants, viewer.label, viewer.expires_at), entry[0]

    def ready(self, viewer: Viewer, not_before: float) -> tuple[Viewer | None, float] | None:
        """What `read` would answer at once: a completed read of the actor that started at
        or after `not_before`; else None, after starting that read in the background when
        none is under way (the fan-out's path, which must not wait: issue 18)."""
        entry = self.reads.get(viewer.actor)
        if entry is None or entry[0] < not_before or _failed(entry[1]):
            if len(self.reads) >= self.LIMIT:
                self.reads.clear()
            started = time.monotonic()
            future = asyncio.ensure_future(refresh_viewer(self.runtime, Viewer(viewer.actor)))
            future.add_done_callback(_failed)  # a failure is retried by the next reader
            self.reads[viewer.actor] = (started, future)
            return None
        if not entry[1].done():
            return None
        fresh = entry[1].result()
        if fresh is None:
            return None, entry[0]
        return Viewer(viewer.actor, fresh.grants, viewer.label, viewer.expires_at), entry[0]


def _failed(future: asyncio.Future[Any]) -> bool:
    """True when `future` ended with an exception (which counts as retrieved)."""
    return future.done() and not future.cancelled() and future.exception() is not None


def shared_grant_reads(runtime: Runtime) -> SharedGrantReads:
    """The runtime's `SharedGrantReads` (made on first use)."""
    if runtime.grant_reads is None:
        runtime.grant_reads = SharedGrantReads(runtime)
    reads: SharedGrantReads = runtime.grant_reads
    return reads


async def _viewer_of(
    uow: UnitOfWork, actor: str, label: str | None, expires_at: datetime | None
) -> Viewer | None:
    """`actor` as a viewer with its current grants, or None once its key is revoked or
    rotated (the token check and the grant refresh read the same)."""
    status = await uow.keys.status(actor)
    if status is not None and status.status in ("revoked", "rotated"):
        return None
    grants = await uow.grants.of_actor(actor)
    return Viewer(actor, tuple(grants), label, expires_at)


async def _check_not_revoked(uow: UnitOfWork, actor: str) -> None:
    status = await uow.keys.status(actor)
    if status is not None and status.status == "revoked":
        raise DomainError(UNAUTHENTICATED, "this key is revoked")
