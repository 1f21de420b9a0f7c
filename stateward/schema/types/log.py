"""Types of the deployment log: signed checkpoints and RFC 9162 proofs (hex hashes)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry

from stateward.records import CheckpointRecord
from stateward.schema.scalars import JSON


@strawberry.type(description="A signed tree head of the deployment log.")
class Checkpoint:
    """`{net, size, root, ts}` signed by a node key; `json` is the portable form."""

    net: str
    size: int
    root: str
    ts: datetime
    signer: str
    signature: str
    json: JSON = strawberry.field(
        description='{"checkpoint": {net, size, root, ts}, "signer", "signature"}: what '
        "`stateward verify --checkpoint` takes."
    )

    @classmethod
    def from_record(cls, record: CheckpointRecord) -> Checkpoint:
        """The wire form of a stored checkpoint."""
        portable: dict[str, Any] = record.as_json()
        return cls(
            net=portable["checkpoint"]["net"],
            size=record.size,
            root=record.root,
            ts=record.ts,
            signer=record.signer,
            signature=record.signature,
            json=portable,
        )


@strawberry.type(description="RFC 9162 inclusion proof of one event (leaf side first).")
class InclusionProof:
    """Leaf `index` with hash `leaf` is in the tree (`size`, `root`) by `path`."""

    process: str
    seq: int
    index: int
    size: int
    leaf: str
    root: str
    path: list[str]

    @classmethod
    def from_domain(cls, proof: Any) -> InclusionProof:
        """From `runtime.proofs.InclusionProof`."""
        return cls(
            process=proof.process, seq=proof.seq, index=proof.index, size=proof.size,
            leaf=proof.leaf, root=proof.root, path=list(proof.path),
        )  # fmt: skip


@strawberry.type(description="RFC 9162 consistency proof between two tree sizes.")
class ConsistencyProof:
    """The tree (`first`, `firstRoot`) is a prefix of (`second`, `secondRoot`)."""

    first: int
    second: int
    first_root: str
    second_root: str
    path: list[str]

    @classmethod
    def from_domain(cls, proof: Any) -> ConsistencyProof:
        """From `runtime.proofs.ConsistencyProof`."""
        return cls(
            first=proof.first, second=proof.second, first_root=proof.first_root,
            second_root=proof.second_root, path=list(proof.path),
        )  # fmt: skip
