"""Keys and envelope signing for clients: RFC 8785 bytes (`rfc8785`), Ed25519 (`PyNaCl`).

An envelope (DESIGN §6) is the exact JSON that is signed:
`{"v": 1, "net", "process", "action": {"name", "workflow", "input"}, "actor", "ts", "nonce"}`.
Its signature is Ed25519 over the RFC 8785 canonical bytes, sent as unpadded base64url with
the signer's public key (also unpadded base64url) to `submitEvent`.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nacl.signing
import rfc8785

ENVELOPE_VERSION = 1
NONCE_BYTES = 16
#: Bytes of time before a nonce's random ones (`nonce`): milliseconds, big-endian.
NONCE_TIME_BYTES = 6


def b64url(data: bytes) -> str:
    """Unpadded base64url, the encoding of keys, signatures and nonces."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Key:
    """An Ed25519 key: `public` (the actor id) and the 32-byte secret `seed`."""

    public: str
    seed: bytes = field(repr=False)

    @classmethod
    def generate(cls) -> Key:
        """A fresh random key."""
        signing = nacl.signing.SigningKey.generate()
        return cls(b64url(bytes(signing.verify_key)), bytes(signing))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Key:
        """A key file of `stateward keygen`: `{"public": …, "secret": <b64url seed>}`."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        key = cls.from_seed(_unb64url(data["secret"]))
        if key.public != data["public"]:
            raise ValueError(f"{path}: the public key does not match the secret")
        return key

    @classmethod
    def from_seed(cls, seed: bytes) -> Key:
        """The key of a 32-byte seed."""
        signing = nacl.signing.SigningKey(seed)
        return cls(b64url(bytes(signing.verify_key)), seed)

    def sign(self, data: bytes) -> str:
        """The base64url Ed25519 signature of `data`."""
        return b64url(nacl.signing.SigningKey(self.seed).sign(data).signature)


def canonical(value: Any) -> bytes:
    """RFC 8785 (JCS) bytes of a JSON value (NaN, ±Infinity, unsafe integers refused)."""
    return rfc8785.dumps(value)


def timestamp(moment: datetime | None = None) -> str:
    """An envelope `ts`: RFC 3339 UTC with milliseconds and `Z`."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def envelope(
    net: str,
    process: str,
    action: str,
    workflow: str,
    input: dict[str, Any] | None,
    actor: str,
) -> dict[str, Any]:
    """A new envelope with the current time and a fresh nonce (`nonce`)."""
    return {
        "v": ENVELOPE_VERSION,
        "net": net,
        "process": process,
        "action": {"name": action, "workflow": workflow, "input": dict(input or {})},
        "actor": actor,
        "ts": timestamp(),
        "nonce": nonce(),
    }


def nonce() -> str:
    """A fresh nonce: the time in milliseconds (6 bytes, big-endian) then 16 random
    bytes, unpadded base64url. The server needs only 16..64 bytes, unique per actor;
    the time keeps the log's (actor, nonce) index writing a few pages, not one random
    page per event (the server's `new_nonce` does the same; this package imports
    nothing of the server's, by contract)."""
    millis = int(time.time() * 1000).to_bytes(NONCE_TIME_BYTES, "big")
    return b64url(millis + secrets.token_bytes(NONCE_BYTES))


def new_process_id() -> str:
    """A new instance id (a UUID, chosen by the signer of `$start`)."""
    return str(uuid.uuid4())


def sign_envelope(value: dict[str, Any], key: Key) -> dict[str, Any]:
    """`{"event", "signer", "signature"}`: the arguments of `submitEvent`."""
    return {"event": value, "signer": key.public, "signature": key.sign(canonical(value))}
