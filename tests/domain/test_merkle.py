"""The Merkle log against RFC 9162 §2.1, checked by a small independent reference.

The reference below is written straight from the RFC's recursive definitions (MTH, PATH,
PROOF/SUBPROOF) over the raw leaves; the module under test builds the same values from
stored perfect subtrees. The roots of the 8-leaf tree are the well-known Certificate
Transparency test vectors for the RFC's hashing (leaf 0x00, node 0x01, SHA-256).
"""

from __future__ import annotations

import hashlib

import pytest

from stateward.domain import merkle

# ------------------------------------------------------------------ independent reference


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def ref_mth(d: list[bytes]) -> bytes:
    n = len(d)
    if n == 0:
        return _h(b"")
    if n == 1:
        return _h(b"\x00" + d[0])
    k = 1
    while k * 2 < n:
        k *= 2
    return _h(b"\x01" + ref_mth(d[:k]) + ref_mth(d[k:]))


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_path(m: int, d: list[bytes]) -> list[bytes]:
    n = len(d)
    if n == 1:
        return []
    k = _k(n)
    if m < k:
        return [*ref_path(m, d[:k]), ref_mth(d[k:])]
    return [*ref_path(m - k, d[k:]), ref_mth(d[:k])]


def ref_subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    n = len(d)
    if m == n:
        return [] if b else [ref_mth(d)]
    k = _k(n)
    if m <= k:
        return [*ref_subproof(m, d[:k], b), ref_mth(d[k:])]
    return [*ref_subproof(m - k, d[k:], False), ref_mth(d[:k])]


# ------------------------------------------------------------------ the CT test data

LEAVES = [
    bytes.fromhex(x)
    for x in [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]
ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


class Store:
    """Perfect subtrees as an append-only store would keep them."""

    def __init__(self) -> None:
        self.nodes: dict[merkle.NodeId, bytes] = {}
        self.frontier: list[bytes] = []
        self.size = 0

    def add(self, data: bytes) -> None:
        self.frontier, created = merkle.append(self.frontier, self.size, merkle.leaf_hash(data))
        for level, index, h in created:
            assert (level, index) not in self.nodes  # nothing stored is ever rewritten
            self.nodes[(level, index)] = h
        self.size += 1

    def get(self, ids: set[merkle.NodeId]) -> dict[merkle.NodeId, bytes]:
        return {i: self.nodes[i] for i in ids}


def _data(n: int) -> list[bytes]:
    return [i.to_bytes(4, "big") for i in range(n)]


def test_empty_tree_root_is_the_hash_of_nothing() -> None:
    assert merkle.EMPTY_ROOT.hex() == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert merkle.root_of([]) == merkle.EMPTY_ROOT == merkle.root_from_frontier([])


def test_roots_match_the_rfc_test_vectors_for_every_prefix() -> None:
    store = Store()
    for i, data in enumerate(LEAVES):
        store.add(data)
        expected = ROOTS[i]
        assert ref_mth(LEAVES[: i + 1]).hex() == expected
        assert merkle.root_from_frontier(store.frontier).hex() == expected
        assert merkle.root_of([merkle.leaf_hash(x) for x in LEAVES[: i + 1]]).hex() == expected


def test_leaf_and_node_hashes_use_the_domain_separation_prefixes() -> None:
    assert merkle.leaf_hash(b"x") == _h(b"\x00x")
    assert merkle.node_hash(b"a" * 32, b"b" * 32) == _h(b"\x01" + b"a" * 32 + b"b" * 32)


def test_append_stores_at_most_log_n_nodes_and_the_frontier_is_log_n() -> None:
    store = Store()
    for n, data in enumerate(_data(300), start=1):
        before = len(store.nodes)
        store.add(data)
        assert len(store.nodes) - before <= n.bit_length()
        assert len(store.frontier) == bin(n).count("1")
    assert len(store.nodes) == 2 * 300 - bin(300).count("1")


@pytest.mark.parametrize("n", [*range(1, 34), 64, 65, 100, 127, 128, 129])
def test_inclusion_proofs_equal_the_reference_and_verify(n: int) -> None:
    data = _data(n)
    store = Store()
    for x in data:
        store.add(x)
    root = merkle.root_from_frontier(store.frontier)
    assert root == ref_mth(data)
    for m in range(n):
        proof = merkle.inclusion_proof(m, n, store.get)
        assert proof == ref_path(m, data)
        leaf = merkle.leaf_hash(data[m])
        assert merkle.verify_inclusion(leaf, m, n, proof, root)
        assert not merkle.verify_inclusion(merkle.leaf_hash(b"other"), m, n, proof, root)
        if proof:
            assert not merkle.verify_inclusion(leaf, m, n, proof[:-1], root)
            bad = [*proof[:-1], bytes(32)]
            assert not merkle.verify_inclusion(leaf, m, n, bad, root)


@pytest.mark.parametrize("n", [*range(1, 34), 64, 65, 100])
def test_consistency_proofs_equal_the_reference_and_verify(n: int) -> None:
    data = _data(n)
    store = Store()
    roots = []
    for x in data:
        store.add(x)
        roots.append(merkle.root_from_frontier(store.frontier))
    for m in range(1, n + 1):
        proof = merkle.consistency_proof(m, n, store.get)
        assert proof == ref_subproof(m, data, True)
        assert merkle.verify_consistency(m, n, roots[m - 1], roots[n - 1], proof)
        if m < n:
            assert not merkle.verify_consistency(m, n, roots[m - 1], roots[n - 2], proof)
            assert not merkle.verify_consistency(m, n, bytes(32), roots[n - 1], proof)
            assert not merkle.verify_consistency(m, n, roots[m - 1], roots[n - 1], proof[:-1])


def test_a_rewritten_prefix_is_not_consistent() -> None:
    data = _data(10)
    old = ref_mth(data[:6])
    forged = [*data[:3], b"evil", *data[4:]]
    store = Store()
    for x in forged:
        store.add(x)
    proof = merkle.consistency_proof(6, 10, store.get)
    assert not merkle.verify_consistency(6, 10, old, ref_mth(forged), proof)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        merkle.inclusion_ranges(5, 5)
    with pytest.raises(ValueError):
        merkle.consistency_ranges(0, 3)
    with pytest.raises(ValueError):
        merkle.consistency_ranges(4, 3)
    with pytest.raises(ValueError):
        merkle.range_nodes(1, 4)  # [1, 4) is not a subtree of any RFC tree
    assert merkle.verify_consistency(0, 5, merkle.EMPTY_ROOT, bytes(32), [])
    assert merkle.verify_consistency(5, 5, b"r", b"r", [])
    assert not merkle.verify_consistency(5, 5, b"r", b"s", [])
    assert not merkle.verify_inclusion(b"x", 0, 0, [], b"x")
