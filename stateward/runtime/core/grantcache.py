"""Key statuses and roles kept across transactions, checked by the grants generation.

Every event needs its signer's and actor's key status (revoked, rotated) and its actor's
roles in the namespace. They change only through registry events (`grant_role`,
`revoke_role`, `rotate_key`, `revoke_key`, genesis), and every write of them raises the
grants generation in the same transaction (`persistence/access.bump_generation`, a row of
`meta`). So a writing transaction reads the generation once (one primary-key read), and
when it equals the generation the runtime's cache was filled at, the cached statuses and
roles are exactly what reading them again would give; otherwise the cache is dropped and
refilled.

Why a number read inside the transaction, and not invalidation by the bus: a key revoked
on node A must be refused by the next event on node B, and bus delivery can lag or fail
(Redis down, a paused node). The generation is read in the same transaction as the event,
after anything committed before it began: a transaction that starts after the revocation
committed reads the new generation and re-reads the status. This is the guarantee the
per-transaction reads gave, with no dependence on the bus; nothing stale can act.

Entries are only ever stored under the generation read BEFORE they were (READ COMMITTED:
the later statement sees at least as much), never by a transaction that wrote grants or
keys itself (it would see its own uncommitted rows), and only if the cache is still at
that generation when the read returns (another transaction of this runtime may have
moved it on meanwhile).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stateward.records import KeyStatusRecord

#: Entries kept per kind before the cache is emptied (bounded memory under many actors).
LIMIT = 65536


@dataclass
class GrantCache:
    """A runtime's key statuses (by key) and roles (by actor and namespace), all read at
    grants generation `generation` or later (module docstring)."""

    generation: int = -1
    statuses: dict[str, KeyStatusRecord | None] = field(default_factory=dict)
    roles: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    #: Lookups answered from the cache / read from the database (tests, the bench).
    hits: int = 0
    misses: int = 0

    def at(self, generation: int) -> None:
        """Make the cache valid for `generation`: emptied when it was at another one."""
        if generation != self.generation:
            self.statuses.clear()
            self.roles.clear()
            self.generation = generation

    def keep_statuses(self, generation: int, found: dict[str, KeyStatusRecord | None]) -> None:
        """Store statuses read after `generation` was (if still at that generation)."""
        if generation != self.generation:
            return
        if len(self.statuses) + len(found) > LIMIT:
            self.statuses.clear()
        self.statuses.update(found)

    def keep_roles(self, generation: int, key: tuple[str, str], roles: frozenset[str]) -> None:
        """Store roles read after `generation` was (if still at that generation)."""
        if generation != self.generation:
            return
        if len(self.roles) >= LIMIT:
            self.roles.clear()
        self.roles[key] = roles
