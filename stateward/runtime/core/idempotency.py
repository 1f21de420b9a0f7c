"""Retry-safe writes: an `idempotencyKey` turns a retried mutation into the same event.

A caller that timed out does not know whether its write was applied. With a key, the
server derives the envelope's nonce from (actor, key) — and a new instance's id too —
so the retry builds an envelope with the SAME (actor, nonce) and:

- the same content (process, workflow, action, input) as the stored event: the answer is
  that original event, `duplicate: true` (applied once, whatever happened to the first try);
- other content: `REPLAYED` (the key was already used for something else).

The key is in effect for one mutation (`keyed(key)`, set by the GraphQL layer); `attest`
asks `derived_nonce(actor)` for each envelope it builds, numbered in build order, so a
mutation that writes several events gets a nonce per event. Nonces hash the actor, so two
callers' keys never collide; `system` events (spawned children, automation, sweeps) keep
random nonces.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.model import SYSTEM_ACTOR
from stateward.governance.envelope import Envelope
from stateward.records import StoredEvent

#: Longest accepted key (characters); any printable text up to that is fine.
MAX_KEY_LENGTH = 200
_DOMAIN = "stateward.idempotency.v1"


@dataclass
class _Key:
    key: str
    built: int = 0
    nonces: set[str] = field(default_factory=set)


_CURRENT: ContextVar[_Key | None] = ContextVar("stateward_idempotency_key", default=None)


def check_key(key: str) -> str:
    """`key` if it is acceptable, else INVALID_INPUT (empty, too long, control characters)."""
    if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise DomainError(
            INVALID_INPUT,
            f"idempotencyKey must be 1..{MAX_KEY_LENGTH} printable characters",
            pointer="/idempotencyKey",
        )
    return key


@contextmanager
def keyed(key: str | None) -> Iterator[None]:
    """Within the block, envelopes built for any actor but `system` derive their nonces
    from `key` and the actor (nothing changes when `key` is None)."""
    if key is None:
        yield
        return
    token = _CURRENT.set(_Key(check_key(key)))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\n".join((_DOMAIN, *parts)).encode("utf-8")).digest()


def derived_nonce(actor: str) -> str | None:
    """The nonce of the next envelope built for `actor` under the current key (None when
    no key is in effect for this actor): b64url(sha256(domain, actor, key, n))."""
    current = _CURRENT.get()
    if current is None or actor == SYSTEM_ACTOR:
        return None
    n = current.built
    current.built += 1
    nonce = base64.urlsafe_b64encode(_digest(actor, current.key, str(n))).rstrip(b"=").decode()
    current.nonces.add(nonce)
    return nonce


def derived_instance_id(actor: str) -> str | None:
    """The id of an instance started under the current key (a retry starts the same one)."""
    current = _CURRENT.get()
    if current is None or actor == SYSTEM_ACTOR:
        return None
    return str(uuid.UUID(bytes=_digest("instance", actor, current.key)[:16], version=4))


def is_keyed(envelope: Envelope) -> bool:
    """True when `envelope`'s nonce was derived from the idempotency key in effect."""
    current = _CURRENT.get()
    return current is not None and envelope.nonce in current.nonces


def same_request(stored: StoredEvent, envelope: Envelope) -> bool:
    """True when `stored` is what `envelope` asks for: same actor, process and action
    (name as signed, workflow, input); only `ts` may differ."""
    original = json.loads(stored.envelope)
    asked = envelope.to_json()
    return all(original.get(k) == asked.get(k) for k in ("net", "process", "actor", "action"))
