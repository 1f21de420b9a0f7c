"""The byte formats of the deployment log: leaf data and checkpoint bodies.

Every committed event is one leaf of the deployment's Merkle tree (`domain.merkle`), at
its log index. The leaf data binds what identifies and authenticates the event; the
per-process chain hash already covers the envelope, the signature and the previous
event (`governance.chain`), so the leaf adds who signed it and where it sits:

    LEAF = b"stateward.leaf.v1\\n"
           || u64be(len(P)) || P     P = process id, UTF-8
           || u64be(seq)
           || u64be(len(S)) || S     S = signer, ASCII (b64url key)
           || u64be(len(H)) || H     H = the event's chain hash, 64 lower-case hex ASCII

and the tree's leaf hash is SHA-256(0x00 || LEAF) (RFC 9162 §2.1.1).

A checkpoint body is `{"net", "size", "root", "ts"}` (root: lower-case hex of the tree
head over the first `size` leaves; ts: RFC 3339 UTC with milliseconds); a node signs its
RFC 8785 bytes with Ed25519. docs/log-format.md is the full description for verifiers.
"""

from __future__ import annotations

import hashlib
from typing import Any

from stateward.domain.canonical import canonical_bytes
from stateward.domain.merkle import LEAF_PREFIX

LEAF_DOMAIN = b"stateward.leaf.v1\n"
_LEAF_START = LEAF_PREFIX + LEAF_DOMAIN
LOG_FORMAT = "stateward.log/1"
CHECKPOINT_TYPE = "log.checkpoint"


def _part(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def leaf_data(process: str, seq: int, signer: str, chain_hash: str) -> bytes:
    """The leaf bytes of one event (layout in the module docstring)."""
    return b"".join(
        (
            LEAF_DOMAIN,
            _part(process.encode("utf-8")),
            seq.to_bytes(8, "big"),
            _part(signer.encode("ascii")),
            _part(chain_hash.encode("ascii")),
        )
    )


def event_leaf_hash(process: str, seq: int, signer: str, chain_hash: str) -> str:
    """The Merkle leaf hash (hex) of one event."""
    return event_leaf(process, seq, signer, chain_hash).hex()


def event_leaf(process: str, seq: int, signer: str, chain_hash: str) -> bytes:
    """The Merkle leaf hash of one event: SHA-256(0x00 || `leaf_data`), in one pass."""
    p, s, h = process.encode("utf-8"), signer.encode("ascii"), chain_hash.encode("ascii")
    return hashlib.sha256(
        b"".join(
            (
                _LEAF_START,
                len(p).to_bytes(8, "big"),
                p,
                seq.to_bytes(8, "big"),
                len(s).to_bytes(8, "big"),
                s,
                len(h).to_bytes(8, "big"),
                h,
            )
        )
    ).digest()


def checkpoint_body(net: str, size: int, root: str, ts: str) -> dict[str, Any]:
    """The signed part of a checkpoint."""
    return {"net": net, "size": size, "root": root, "ts": ts}


def checkpoint_bytes(body: dict[str, Any]) -> bytes:
    """What a node signs: the RFC 8785 bytes of the body."""
    return canonical_bytes(body)
