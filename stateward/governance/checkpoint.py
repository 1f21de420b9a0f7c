"""Signed checkpoints of the deployment log: sign, parse and verify (pure).

A checkpoint is `{"checkpoint": {"net", "size", "root", "ts"}, "signer", "signature"}`:
the body as in `domain.logformat`, signed (Ed25519, strict RFC 8032) over its RFC 8785
bytes by a node key. Parsing refuses anything else with `INVALID_INPUT`; a signature
that does not verify, or a signer outside the trusted keys, is `BAD_SIGNATURE`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from stateward.domain.errors import BAD_SIGNATURE, INVALID_INPUT, DomainError
from stateward.domain.logformat import checkpoint_body, checkpoint_bytes
from stateward.governance.keys import KeyPair, is_public_key, verify_signature

_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class SignedCheckpoint:
    """A parsed checkpoint: the body fields, who signed it and the signature."""

    net: str
    size: int
    root: str
    ts: str
    signer: str
    signature: str

    @property
    def body(self) -> dict[str, Any]:
        """The signed body."""
        return checkpoint_body(self.net, self.size, self.root, self.ts)

    def as_json(self) -> dict[str, Any]:
        """The portable form (what `stateward checkpoint` prints)."""
        return {"checkpoint": self.body, "signer": self.signer, "signature": self.signature}


def sign_checkpoint(net: str, size: int, root: str, ts: str, key: KeyPair) -> SignedCheckpoint:
    """Sign the body `{net, size, root, ts}` with `key`."""
    signature = key.sign(checkpoint_bytes(checkpoint_body(net, size, root, ts)))
    return SignedCheckpoint(net, size, root, ts, key.public, signature)


def _bad(message: str, pointer: str = "") -> DomainError:
    return DomainError(INVALID_INPUT, f"checkpoint: {message}", pointer=pointer)


def parse_checkpoint(value: Any) -> SignedCheckpoint:
    """The checkpoint in `value` (shape checked; the signature is not)."""
    if not isinstance(value, Mapping) or set(value) != {"checkpoint", "signer", "signature"}:
        raise _bad("expected an object with exactly checkpoint, signer and signature")
    body = value["checkpoint"]
    if not isinstance(body, Mapping) or set(body) != {"net", "size", "root", "ts"}:
        raise _bad("the body must have exactly net, size, root and ts", "/checkpoint")
    size = body["size"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise _bad("size must be a non-negative integer", "/checkpoint/size")
    root = body["root"]
    if not isinstance(root, str) or not _HEX64.fullmatch(root):
        raise _bad("root must be 64 lower-case hex digits", "/checkpoint/root")
    for key in ("net", "ts"):
        if not isinstance(body[key], str) or not body[key]:
            raise _bad(f"{key} must be a non-empty string", f"/checkpoint/{key}")
    if not is_public_key(value["signer"]):
        raise _bad("signer must be an Ed25519 public key", "/signer")
    if not isinstance(value["signature"], str):
        raise _bad("signature must be a string", "/signature")
    return SignedCheckpoint(
        body["net"], size, root, body["ts"], value["signer"], value["signature"]
    )


def verify_checkpoint(
    checkpoint: SignedCheckpoint, *, net: str | None = None, trusted: Collection[str] | None = None
) -> None:
    """Raise BAD_SIGNATURE unless the signature verifies (and the signer is in `trusted`
    and the checkpoint is for `net`, when given)."""
    if net is not None and checkpoint.net != net:
        raise DomainError(
            BAD_SIGNATURE, f"checkpoint is for deployment {checkpoint.net}, not {net}"
        )
    if trusted is not None and checkpoint.signer not in trusted:
        raise DomainError(
            BAD_SIGNATURE, f"checkpoint signer {checkpoint.signer} is not a trusted node key"
        )
    if not verify_signature(
        checkpoint.signer, checkpoint_bytes(checkpoint.body), checkpoint.signature
    ):
        raise DomainError(BAD_SIGNATURE, "checkpoint signature does not verify")
