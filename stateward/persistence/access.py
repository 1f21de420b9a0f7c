"""Who may do what: role grants, key rotation/revocation, API tokens, login challenges."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import cast

from sqlalchemy import Table, delete, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from stateward.persistence.base import Repository, to_record
from stateward.persistence.models import ApiToken, AuthChallenge, KeyStatus, RoleGrant
from stateward.persistence.models_ops import Meta
from stateward.persistence.writebuffer import INDEPENDENT
from stateward.records import ApiTokenRecord, GrantRecord, KeyStatusRecord

G = cast(Table, RoleGrant.__table__)
K = cast(Table, KeyStatus.__table__)
T = cast(Table, ApiToken.__table__)
C = cast(Table, AuthChallenge.__table__)
MT = cast(Table, Meta.__table__)

SYSTEM_NAMESPACE = "system"

#: `meta` key of the grants generation: a counter every write of a role grant or a key
#: status raises in its own transaction, so a cache of them can be checked with one read.
GENERATION_KEY = "grant_generation"
#: `session.info` flag: this transaction wrote a grant or a key status (its later reads
#: see its own uncommitted writes, which no cross-transaction cache may keep).
WRITTEN_INFO = "stateward.grants_written"
_READ_GENERATION = text("SELECT value FROM meta WHERE key = :k").execution_options(
    **{INDEPENDENT: True}
)
_BUMP_GENERATION = text(
    "INSERT INTO meta (key, value) VALUES (:k, '1') ON CONFLICT (key) "
    "DO UPDATE SET value = CAST(CAST(meta.value AS BIGINT) + 1 AS TEXT)"
)


#: `session.info` key: the grants generation read with SQLite's locked read of the
#: transaction's processes (`note_generation`), so reading it costs no statement of its own.
NOTED_INFO = "stateward.grants_generation"
#: The generation as a scalar subquery, for a statement that carries it (`processes`).
GENERATION_VALUE = (
    select(MT.c.value)
    .where(MT.c.key == GENERATION_KEY)
    .scalar_subquery()
    .label("grants_generation")
)


async def grant_generation(session: AsyncSession) -> int:
    """The grants generation as this transaction sees it (0 before the first change).

    Every write of `role_grants` or `key_status` raises it in the same transaction
    (`bump_generation`), so a role or key status read AFTER this value in the same
    transaction is at least as new as the generation: a cache tagged with it is exact
    for as long as a later transaction reads the same number (`runtime/core/grantcache`).
    A value noted earlier in the transaction (`note_generation`) is that read, made then.
    """
    noted = session.info.get(NOTED_INFO)
    if noted is not None:
        return int(noted)
    found = (await session.execute(_READ_GENERATION, {"k": GENERATION_KEY})).scalar()
    return int(found) if found is not None else 0


def note_generation(session: AsyncSession, value: str | None) -> None:
    """Remember the generation a statement of this transaction read (`GENERATION_VALUE`)
    for `grant_generation`: SQLite's writer holds the write lock from its `BEGIN
    IMMEDIATE`, so no other transaction can change it before the transaction ends, and
    one that changes it itself forgets the note (`bump_generation`)."""
    if not grants_written(session):
        session.info[NOTED_INFO] = int(value) if value is not None else 0


async def bump_generation(session: AsyncSession) -> None:
    """Raise the grants generation (inside the transaction that changes grants or keys)
    and mark the transaction as having written them."""
    session.info[WRITTEN_INFO] = True
    session.info.pop(NOTED_INFO, None)
    await session.execute(_BUMP_GENERATION, {"k": GENERATION_KEY})


def grants_written(session: AsyncSession) -> bool:
    """Whether this transaction wrote a grant or a key status (`bump_generation`)."""
    return bool(session.info.get(WRITTEN_INFO))


def namespace_scopes(namespace: str) -> list[str]:
    """Namespaces whose grants apply in `namespace`: `system` and every prefix of it."""
    parts = namespace.split("/")
    scopes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return [SYSTEM_NAMESPACE, *(s for s in scopes if s != SYSTEM_NAMESPACE)]


class GrantRepository(Repository):
    """Role grants materialized from registry events."""

    async def grant(
        self, namespace: str, actor: str, role: str, now: datetime, event_id: int | None = None
    ) -> bool:
        """Give `actor` `role` in `namespace`; False when it already held it."""
        values = dict(namespace=namespace, actor=actor, role=role.lower(), granted_at=now)
        values["event_id"] = event_id  # type: ignore[assignment]
        stmt = self.insert_ignoring_conflicts(G, values, ("namespace", "actor", "role"))
        await bump_generation(self.session)
        result = await self.session.execute(stmt)
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def revoke(self, namespace: str, actor: str, role: str) -> bool:
        """Take `role` in `namespace` from `actor`; False when it did not hold it."""
        stmt = delete(G).where(
            G.c.namespace == namespace, G.c.actor == actor, G.c.role == role.lower()
        )
        await bump_generation(self.session)
        return bool((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def roles_of(self, actor: str, namespace: str) -> frozenset[str]:
        """The roles `actor` holds in `namespace` (grants of `system` and every prefix)."""
        stmt = select(G.c.role).where(
            G.c.actor == actor, G.c.namespace.in_(namespace_scopes(namespace))
        )
        return frozenset((await self.session.execute(stmt)).scalars())

    async def holders(self, role: str, namespace: str) -> list[str]:
        """The actors holding `role` in `namespace` (grants of `system` and every prefix),
        sorted by actor id: a team's members in a stable order."""
        stmt = (
            select(G.c.actor)
            .where(G.c.role == role.lower(), G.c.namespace.in_(namespace_scopes(namespace)))
            .distinct()
            .order_by(G.c.actor)
        )
        return list((await self.session.execute(stmt)).scalars())

    async def members(self, namespace: str) -> list[GrantRecord]:
        """Grants made in `namespace`'s own registry, by actor then role."""
        stmt = select(G).where(G.c.namespace == namespace).order_by(G.c.actor, G.c.role)
        return [to_record(GrantRecord, r) for r in await self.session.execute(stmt)]

    async def of_actor(self, actor: str) -> list[GrantRecord]:
        """Every grant `actor` holds, by namespace then role."""
        stmt = select(G).where(G.c.actor == actor).order_by(G.c.namespace, G.c.role)
        return [to_record(GrantRecord, r) for r in await self.session.execute(stmt)]

    async def move(self, old_actor: str, new_actor: str, now: datetime) -> int:
        """Move every grant of `old_actor` to `new_actor` (key rotation); returns the count."""
        await bump_generation(self.session)
        moved = 0
        for g in await self.of_actor(old_actor):
            moved += await self.grant(g.namespace, new_actor, g.role, now, g.event_id)
        await self.session.execute(delete(G).where(G.c.actor == old_actor))
        return moved


class KeyRepository(Repository):
    """Rotation and revocation state of actor keys."""

    async def status(self, actor: str) -> KeyStatusRecord | None:
        """The recorded status of `actor`'s key (None = never rotated or revoked)."""
        row = (await self.session.execute(select(K).where(K.c.actor == actor))).one_or_none()
        return None if row is None else to_record(KeyStatusRecord, row)

    async def statuses(self, actors: Iterable[str]) -> dict[str, KeyStatusRecord]:
        """Batch loader: recorded statuses by actor."""
        stmt = select(K).where(K.c.actor.in_(list(dict.fromkeys(actors))))
        return {r.actor: to_record(KeyStatusRecord, r) for r in await self.session.execute(stmt)}

    async def _upsert(self, actor: str, **values: object) -> None:
        await bump_generation(self.session)
        if await self.status(actor) is None:
            await self.session.execute(insert(K).values(actor=actor, **values))
        else:
            await self.session.execute(update(K).where(K.c.actor == actor).values(**values))

    async def rotate(
        self, actor: str, new_actor: str, now: datetime, event_id: int | None = None
    ) -> None:
        """Record that `actor`'s key was replaced by `new_actor`."""
        await self._upsert(
            actor, status="rotated", rotated_to=new_actor, rotated_at=now, event_id=event_id
        )

    async def revoke(self, actor: str, now: datetime, event_id: int | None = None) -> None:
        """Record that `actor`'s key is revoked from `now` on (earlier events still verify)."""
        await self._upsert(actor, status="revoked", revoked_at=now, event_id=event_id)


class TokenRepository(Repository):
    """API tokens (hashed) and single-use login challenges."""

    async def add(
        self,
        token_hash: str,
        actor: str,
        now: datetime,
        *,
        label: str | None = None,
        expires_at: datetime | None = None,
    ) -> ApiTokenRecord:
        """Store a new token's sha256 for `actor`."""
        record = ApiTokenRecord(token_hash, actor, label, expires_at, now)
        await self.session.execute(
            insert(T).values(
                token_hash=token_hash,
                actor=actor,
                label=label,
                expires_at=expires_at,
                created_at=now,
            )
        )
        return record

    async def get(self, token_hash: str) -> ApiTokenRecord | None:
        """The token whose sha256 is `token_hash` (check `valid_at`), or None."""
        row = (
            await self.session.execute(select(T).where(T.c.token_hash == token_hash))
        ).one_or_none()
        return None if row is None else to_record(ApiTokenRecord, row)

    async def of_actor(self, actor: str, limit: int = 1000) -> list[ApiTokenRecord]:
        """`actor`'s tokens (live, expired and revoked), newest first."""
        stmt = (
            select(T)
            .where(T.c.actor == actor)
            .order_by(T.c.created_at.desc(), T.c.token_hash)
            .limit(limit)
        )
        return [to_record(ApiTokenRecord, r) for r in await self.session.execute(stmt)]

    async def revoke(self, token_hash: str, now: datetime) -> bool:
        """Revoke a token; False when unknown or already revoked."""
        stmt = (
            update(T)
            .where(T.c.token_hash == token_hash, T.c.revoked_at.is_(None))
            .values(revoked_at=now)
        )
        return bool((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def add_challenge(
        self, challenge: str, public_key: str, expires_at: datetime, now: datetime
    ) -> None:
        """Store a login challenge issued to `public_key`."""
        await self.session.execute(
            insert(C).values(
                challenge=challenge, public_key=public_key, expires_at=expires_at, created_at=now
            )
        )

    async def consume_challenge(self, challenge: str, public_key: str, now: datetime) -> bool:
        """Use a challenge once: True only for the first use, before expiry, by its key."""
        stmt = (
            update(C)
            .where(
                C.c.challenge == challenge,
                C.c.public_key == public_key,
                C.c.used_at.is_(None),
                C.c.expires_at > now,
            )
            .values(used_at=now)
        )
        return bool((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def purge_challenges(self, now: datetime) -> int:
        """Delete expired challenges; returns how many."""
        stmt = delete(C).where(C.c.expires_at <= now)
        return int((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]
