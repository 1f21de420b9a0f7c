"""Inclusion and consistency proofs of the deployment log (RFC 9162 §2.1.3, §2.1.4).

`event_proof(process, seq, size)` proves that event `seq` of `process` is leaf
`index` of the tree of `size` leaves (default: the current tree); `consistency_proof(
first, second)` proves that the tree of `first` leaves is a prefix of the tree of
`second`. Hashes are lower-case hex; the proofs are the RFC's lists, in its order.
"""

from __future__ import annotations

from dataclasses import dataclass

from stateward.domain import merkle
from stateward.domain.errors import INVALID_INPUT, NOT_FOUND, DomainError
from stateward.persistence import UnitOfWork
from stateward.runtime.core.services import Runtime


@dataclass(frozen=True)
class InclusionProof:
    """Leaf `index` (hash `leaf`) is in the tree (`size`, `root`) by `path`."""

    process: str
    seq: int
    index: int
    size: int
    leaf: str
    root: str
    path: tuple[str, ...]


@dataclass(frozen=True)
class ConsistencyProof:
    """The tree (`first`, `first_root`) is a prefix of (`second`, `second_root`)."""

    first: int
    second: int
    first_root: str
    second_root: str
    path: tuple[str, ...]


async def _size(uow: UnitOfWork, size: int | None, name: str = "size") -> int:
    current, _root = await uow.log.head()
    if size is None:
        return current
    if size < 0 or size > current:
        raise DomainError(
            INVALID_INPUT, f"{name} {size} is outside the log (0..{current})", pointer=f"/{name}"
        )
    return size


async def _nodes(uow: UnitOfWork, ranges: list[tuple[int, int]]) -> dict[merkle.NodeId, bytes]:
    return await uow.log.nodes(merkle.needed_nodes(ranges))


async def event_proof(
    runtime: Runtime, process: str, seq: int, size: int | None = None
) -> InclusionProof:
    """The inclusion proof of one event (NOT_FOUND when it does not exist or is not in
    the tree of `size`)."""
    async with runtime.uow(readonly=True) as uow:
        leaf = await uow.log.leaf_of(process, seq)
        if leaf is None:
            raise DomainError(NOT_FOUND, f"event {seq} of process {process} is not in the log")
        index, leaf_hash = leaf
        size = await _size(uow, size)
        if index >= size:
            raise DomainError(
                NOT_FOUND, f"event {process}/{seq} is leaf {index}, not in a tree of size {size}"
            )
        ranges = merkle.inclusion_ranges(index, size)
        nodes = await _nodes(uow, [*ranges, (0, size)])
    path = merkle.hashes_of(ranges, nodes)
    root = merkle.hashes_of([(0, size)], nodes)[0]
    return InclusionProof(
        process, seq, index, size, leaf_hash, root.hex(), tuple(h.hex() for h in path)
    )


async def consistency_proof(
    runtime: Runtime, first: int, second: int | None = None
) -> ConsistencyProof:
    """The consistency proof from the tree of `first` leaves to the tree of `second`
    (default: the current tree)."""
    async with runtime.uow(readonly=True) as uow:
        second = await _size(uow, second, "second")
        first = await _size(uow, first, "first")
        if first > second:
            raise DomainError(
                INVALID_INPUT, f"first {first} is after second {second}", pointer="/first"
            )
        ranges = merkle.consistency_ranges(first, second) if 0 < first < second else []
        whole = [(0, s) for s in (first, second) if s]
        nodes = await _nodes(uow, [*ranges, *whole])
    roots = {
        s: merkle.hashes_of([(0, s)], nodes)[0] if s else merkle.EMPTY_ROOT for s in (first, second)
    }
    return ConsistencyProof(
        first,
        second,
        roots[first].hex(),
        roots[second].hex(),
        tuple(h.hex() for h in merkle.hashes_of(ranges, nodes)),
    )
