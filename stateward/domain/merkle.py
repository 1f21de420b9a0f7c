"""The Merkle tree of the deployment log (RFC 9162 §2.1): hashes, proofs, verification.

Pure functions over bytes. The tree over leaves D[0:n] is the one of RFC 9162 §2.1.1:

    MTH({})        = SHA-256()
    MTH({d0})      = SHA-256(0x00 || d0)                       (leaf hash)
    MTH(D[0:n])    = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n]))  k = largest power of 2 < n

Storage works with *perfect subtrees*: node (level, index) is the hash of the 2**level
leaves starting at index * 2**level. Appending a leaf completes at most log2(n) of them
(`append`), and every hash a proof needs — of any range [a, b) the RFC recursion visits —
is a right fold of the perfect subtrees that tile it (`range_nodes`, `fold`). The store
only ever keeps perfect subtrees, so nothing stored changes after it is written.

Proofs are lists of 32-byte hashes in the order of RFC 9162 §2.1.3.1 (inclusion, leaf
side first) and §2.1.4.1 (consistency); `verify_inclusion` and `verify_consistency` are
the verification algorithms of §2.1.3.2 and §2.1.4.2.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
EMPTY_ROOT = hashlib.sha256(b"").digest()

#: (level, index): the perfect subtree over leaves [index * 2**level, (index + 1) * 2**level).
NodeId = tuple[int, int]


def leaf_hash(data: bytes) -> bytes:
    """MTH of one leaf: SHA-256(0x00 || data)."""
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """An interior node: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly smaller than n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_of(leaf_hashes: Sequence[bytes]) -> bytes:
    """MTH over already-hashed leaves (the empty tree's root for none)."""
    if not leaf_hashes:
        return EMPTY_ROOT
    level = list(leaf_hashes)
    # Pairwise from the left, carrying an odd last node up: the same tree as the RFC's
    # recursion, because its left subtrees are always perfect.
    while len(level) > 1:
        nxt = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


# --------------------------------------------------------------------------- append


def frontier_ids(size: int) -> list[NodeId]:
    """The perfect subtrees that tile [0, size), largest (leftmost) first."""
    ids, start = [], 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            ids.append((level, start >> level))
            start += 1 << level
    return ids


def append(
    frontier: Sequence[bytes], size: int, leaf: bytes
) -> tuple[list[bytes], list[tuple[int, int, bytes]]]:
    """Add one leaf hash to a tree of `size` leaves whose frontier (the hashes of
    `frontier_ids(size)`) is given. Returns the new frontier and the new perfect
    subtrees `(level, index, hash)` it completed (the leaf itself at level 0 first)."""
    stack = list(frontier)
    created = [(0, size, leaf)]
    node, level, index = leaf, 0, size
    while (index & 1) == 1:  # this node is a right child: it completes its parent
        node = node_hash(stack.pop(), node)
        level, index = level + 1, index >> 1
        created.append((level, index, node))
    stack.append(node)
    return stack, created


def fold(hashes: Sequence[bytes]) -> bytes:
    """The root over consecutive perfect subtrees given largest first (right fold)."""
    if not hashes:
        return EMPTY_ROOT
    acc = hashes[-1]
    for h in reversed(hashes[:-1]):
        acc = node_hash(h, acc)
    return acc


def root_from_frontier(frontier: Sequence[bytes]) -> bytes:
    """The tree root from its frontier."""
    return fold(frontier)


# --------------------------------------------------------------------------- proofs


def range_nodes(start: int, end: int) -> list[NodeId]:
    """The perfect subtrees tiling [start, end), largest first. Their right fold is the
    range's MTH for the ranges the RFC recursion visits (the sizes strictly decrease);
    any other range is refused."""
    ids: list[NodeId] = []
    pos = start
    while pos < end:
        level = (end - pos).bit_length() - 1
        while pos % (1 << level):
            level -= 1
        if ids and level >= ids[-1][0]:
            raise ValueError(f"range [{start}, {end}) is not a subtree of the log's tree")
        ids.append((level, pos >> level))
        pos += 1 << level
    return ids


def inclusion_ranges(m: int, n: int) -> list[tuple[int, int]]:
    """The ranges whose MTH make up PATH(m, D[0:n]) (RFC 9162 §2.1.3.1), in proof order."""
    if not 0 <= m < n:
        raise ValueError(f"leaf {m} is not in a tree of size {n}")
    out: list[tuple[int, int]] = []
    lo, hi = 0, n
    while hi - lo > 1:
        k = _split(hi - lo)
        if m - lo < k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo = lo + k
    out.reverse()
    return out


def consistency_ranges(m: int, n: int) -> list[tuple[int, int]]:
    """The ranges whose MTH make up PROOF(m, D[0:n]) (RFC 9162 §2.1.4.1), in proof order."""
    if not 0 < m <= n:
        raise ValueError(f"no consistency proof from size {m} to size {n}")
    out: list[tuple[int, int]] = []
    lo, hi, whole = 0, n, True
    while m - lo != hi - lo:  # SUBPROOF(m', D[lo:hi], whole) with m' = m - lo < hi - lo
        k = _split(hi - lo)
        if m - lo <= k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo, whole = lo + k, False
    if not whole:
        out.append((lo, hi))
    out.reverse()
    return out


def needed_nodes(ranges: Iterable[tuple[int, int]]) -> set[NodeId]:
    """Every stored node the MTH of `ranges` needs."""
    return {node for a, b in ranges for node in range_nodes(a, b)}


def hashes_of(ranges: Sequence[tuple[int, int]], nodes: Mapping[NodeId, bytes]) -> list[bytes]:
    """The MTH of each range from stored perfect subtrees (KeyError when one is missing)."""
    return [fold([nodes[node] for node in range_nodes(a, b)]) for a, b in ranges]


def inclusion_proof(
    m: int, n: int, get: Callable[[set[NodeId]], Mapping[NodeId, bytes]]
) -> list[bytes]:
    """PATH(m, D[0:n]), reading stored nodes through `get(ids) -> {id: hash}`."""
    ranges = inclusion_ranges(m, n)
    return hashes_of(ranges, get(needed_nodes(ranges)))


def consistency_proof(
    m: int, n: int, get: Callable[[set[NodeId]], Mapping[NodeId, bytes]]
) -> list[bytes]:
    """PROOF(m, D[0:n]), reading stored nodes through `get(ids) -> {id: hash}`."""
    ranges = consistency_ranges(m, n)
    return hashes_of(ranges, get(needed_nodes(ranges)))


# --------------------------------------------------------------------------- verify


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """RFC 9162 §2.1.3.2: does `proof` show leaf hash `leaf` at `index` in `root`?"""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2: is the tree (`first`, `first_root`) a prefix of (`second`,
    `second_root`) according to `proof`?"""
    if first == second:
        return not proof and first_root == second_root
    if first == 0:
        return not proof  # the empty tree is a prefix of every tree
    if first > second or not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:  # a power of two: first_root is the first node
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and fr == first_root and sr == second_root
