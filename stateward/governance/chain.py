"""The per-process hash chain of the append-only event log.

Each stored event has `seq` (1, 2, 3, … per process), `prev_hash` (the previous event's
`hash`, `GENESIS_PREV` for seq 1) and `hash = event_hash(prev_hash, canonical, signature)`.
Byte layout hashed (unambiguous: every part is length-prefixed):

    sha256( DOMAIN
            || u64be(len(P)) || P      P = prev_hash as ASCII (64 lower-case hex)
            || u64be(len(C)) || C      C = RFC 8785 bytes of the envelope
            || u64be(len(S)) || S )    S = signature as stored (b64url ASCII)

with DOMAIN = b"stateward.event.v1\\n". Changing any event, reordering, dropping or
inserting one breaks every later link; `verify_chain` says where.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

GENESIS_PREV = "0" * 64
FIRST_SEQ = 1
HASH_DOMAIN = b"stateward.event.v1\n"

# Problem codes reported by verify_chain
SEQ_GAP = "SEQ_GAP"
PREV_HASH_MISMATCH = "PREV_HASH_MISMATCH"
HASH_MISMATCH = "HASH_MISMATCH"


def _part(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def event_hash(prev_hash: str | None, canonical_envelope: bytes, signature: str) -> str:
    """The chain hash of one event (layout in the module docstring); None = genesis."""
    prev = (GENESIS_PREV if prev_hash is None else prev_hash).encode("ascii")
    sig = signature.encode("ascii")
    return hashlib.sha256(
        b"".join(
            (
                HASH_DOMAIN,
                len(prev).to_bytes(8, "big"),
                prev,
                len(canonical_envelope).to_bytes(8, "big"),
                canonical_envelope,
                len(sig).to_bytes(8, "big"),
                sig,
            )
        )
    ).hexdigest()


@dataclass(frozen=True)
class ChainLink:
    """What `verify_chain` needs of one stored event."""

    process: str
    seq: int
    prev_hash: str
    hash: str
    canonical_envelope: bytes
    signature: str


@dataclass(frozen=True)
class ChainProblem:
    """One break in a chain: which process, which seq, what is wrong."""

    process: str
    seq: int
    code: str
    message: str


def verify_chain(events: Iterable[ChainLink]) -> list[ChainProblem]:
    """Check seq continuity, prev_hash links and recomputed hashes, per process.

    `events` must be in seq order within each process (processes may interleave). The
    first event seen of a process must be seq 1 with prev_hash `GENESIS_PREV`. Returns
    every problem found (empty list = intact); a hash mismatch does not stop the walk, so
    one tampered event reports itself and the broken link after it.
    """
    problems: list[ChainProblem] = []
    last: dict[str, tuple[int, str]] = {}
    for link in events:
        expected_seq, expected_prev = (
            (last[link.process][0] + 1, last[link.process][1])
            if link.process in last
            else (FIRST_SEQ, GENESIS_PREV)
        )
        if link.seq != expected_seq:
            problems.append(
                ChainProblem(
                    link.process,
                    link.seq,
                    SEQ_GAP,
                    f"expected seq {expected_seq}, found {link.seq}",
                )
            )
        if link.prev_hash != expected_prev:
            problems.append(
                ChainProblem(
                    link.process,
                    link.seq,
                    PREV_HASH_MISMATCH,
                    f"prev_hash {link.prev_hash[:12]}… does not match the previous event's "
                    f"hash {expected_prev[:12]}…",
                )
            )
        recomputed = event_hash(link.prev_hash, link.canonical_envelope, link.signature)
        if recomputed != link.hash:
            problems.append(
                ChainProblem(
                    link.process,
                    link.seq,
                    HASH_MISMATCH,
                    f"stored hash {link.hash[:12]}… differs from the recomputed "
                    f"{recomputed[:12]}… (event content or signature changed)",
                )
            )
        last[link.process] = (link.seq, link.hash)
    return problems
