"""Signing envelopes and deciding whether a signed envelope may be acted upon.

`verify_envelope` is the pure half of DESIGN §6 "Verification rejects": a forged or
malformed signature, a signer that is neither the actor nor a trusted server key, an
envelope for another deployment (`net`), a revoked key and a timestamp outside ±300 s of
the server's clock are all `BAD_SIGNATURE` (with `details["reason"]`). The half that needs
the database — a reused (actor, nonce), an unknown process or action — belongs to the
runtime, which uses `resubmission` below:

1. parse (`loads_strict` / `SignedEnvelope.from_json`), 2. `verify_envelope`,
3. look up the stored event with the same (actor, nonce) and call
   `resubmission(envelope, stored_identity)`: "new" -> act; "duplicate" -> return the
   original event with `duplicate: true`; other content -> `DomainError(REPLAYED)`.
The unique (actor, nonce) index of the events table closes the race between 3 and commit.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime
from typing import Literal

from stateward.domain.errors import BAD_SIGNATURE, REPLAYED, DomainError
from stateward.governance.envelope import SYSTEM_ACTOR, Envelope, SignedEnvelope
from stateward.governance.keys import KeyPair, is_public_key, verify_signature

#: Accepted clock skew between an envelope's `ts` and the server (inclusive), in seconds.
WINDOW_S = 300.0

#: revoked(key, ts) -> True when `key` was revoked at or before the envelope time `ts`.
RevokedCheck = Callable[[str, str], bool]


def sign_envelope(envelope: Envelope, keypair: KeyPair) -> SignedEnvelope:
    """Sign the canonical bytes of `envelope` with `keypair` (a client's or the node key)."""
    return SignedEnvelope(
        envelope=envelope, signer=keypair.public, signature=keypair.sign(envelope.canonical())
    )


def _reject(reason: str, message: str, **details: object) -> DomainError:
    return DomainError(BAD_SIGNATURE, message, details={"reason": reason, **details})


def verify_envelope(
    signed: SignedEnvelope,
    *,
    net: str,
    now: datetime | None,
    trusted_signers: Collection[str],
    revoked: RevokedCheck | None = None,
    window_s: float = WINDOW_S,
    signature_ok: bool | None = None,
) -> None:
    """Raise `DomainError(BAD_SIGNATURE)` unless `signed` may be acted upon here and now.

    Checks, in order: `net` is this deployment's; the signer is the actor itself or one
    of `trusted_signers` (server keys; `system` and `visitor:` actors need one); the
    Ed25519 signature over the canonical bytes is valid (strict RFC 8032); neither the
    signer nor a key actor is revoked at `ts`; `ts` is within ±`window_s` of `now`
    (boundary inclusive). `now=None` skips the clock check (re-verifying the stored log).
    `signature_ok`: the result of `verify_signature` on exactly these bytes, when the
    caller already has it (a log verified in parallel).
    `details["reason"]` is one of: wrong_net, untrusted_signer, forged, revoked, stale,
    future.
    """
    envelope = signed.envelope
    if envelope.net != net:
        raise _reject(
            "wrong_net",
            f"envelope was signed for deployment {envelope.net!r}, not this one ({net!r})",
        )
    trusted = signed.signer in trusted_signers
    if not trusted and (signed.signer != envelope.actor or not is_public_key(envelope.actor)):
        who = "server-attested actors" if not is_public_key(envelope.actor) else "the actor"
        raise _reject(
            "untrusted_signer",
            f"signer {signed.signer} is neither the actor nor a trusted server key "
            f"(required for {who})",
        )
    if signature_ok is None:
        signature_ok = verify_signature(signed.signer, envelope.canonical(), signed.signature)
    if not signature_ok:
        raise _reject("forged", "signature does not verify for the envelope's canonical bytes")
    if revoked is not None:
        for key in {signed.signer, envelope.actor} - {SYSTEM_ACTOR}:
            if is_public_key(key) and revoked(key, envelope.ts):
                raise _reject("revoked", f"key revoked: {key} was revoked before {envelope.ts}")
    if now is not None:
        skew = (envelope.timestamp - now).total_seconds()
        if skew < -window_s:
            raise _reject(
                "stale",
                f"stale timestamp: ts is {-skew:.3f} s before server time (window ±{window_s:g} s)",
                skew_s=skew,
            )
        if skew > window_s:
            raise _reject(
                "future",
                f"future timestamp: ts is {skew:.3f} s after server time (window ±{window_s:g} s)",
                skew_s=skew,
            )


def resubmission(envelope: Envelope, stored_identity: str | None) -> Literal["new", "duplicate"]:
    """Classify an envelope against the stored event with the same (actor, nonce).

    None stored -> "new"; the same identity -> "duplicate" (answer with the original
    event, `duplicate: true`); a different identity -> `DomainError(REPLAYED)`.
    """
    if stored_identity is None:
        return "new"
    if stored_identity == envelope.identity():
        return "duplicate"
    raise DomainError(
        REPLAYED,
        f"nonce {envelope.nonce} of actor {envelope.actor} was already used for another event",
        details={"actor": envelope.actor, "nonce": envelope.nonce},
    )
