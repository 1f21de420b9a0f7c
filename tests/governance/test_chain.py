"""The hash chain: exact byte layout, intact chains pass, every kind of tampering is found."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from stateward.governance.chain import (
    GENESIS_PREV,
    HASH_MISMATCH,
    PREV_HASH_MISMATCH,
    SEQ_GAP,
    ChainLink,
    event_hash,
    verify_chain,
)
from stateward.governance.envelope import Envelope
from stateward.governance.keys import KeyPair, b64url_encode
from stateward.governance.verification import sign_envelope


def _chain(
    process: str, count: int, envelope_json: dict[str, Any], key: KeyPair
) -> list[ChainLink]:
    links: list[ChainLink] = []
    prev = GENESIS_PREV
    for seq in range(1, count + 1):
        obj = dict(envelope_json, process=process, nonce=b64url_encode(bytes([seq]) * 16))
        obj["action"] = dict(obj["action"], input={"step": seq})
        signed = sign_envelope(Envelope.from_json(obj), key)
        canonical = signed.envelope.canonical()
        digest = event_hash(prev, canonical, signed.signature)
        links.append(ChainLink(process, seq, prev, digest, canonical, signed.signature))
        prev = digest
    return links


def _codes(problems: list[Any]) -> list[tuple[str, int, str]]:
    return [(p.process, p.seq, p.code) for p in problems]


def test_event_hash_follows_the_documented_length_prefixed_layout() -> None:
    prev, canonical, signature = "ab" * 32, b'{"v":1}', "c2ln"
    expected = hashlib.sha256(
        b"stateward.event.v1\n"
        + (64).to_bytes(8, "big")
        + prev.encode()
        + (7).to_bytes(8, "big")
        + canonical
        + (4).to_bytes(8, "big")
        + signature.encode()
    ).hexdigest()
    assert event_hash(prev, canonical, signature) == expected


def test_genesis_prev_is_64_zeros_and_none_means_genesis() -> None:
    assert GENESIS_PREV == "0" * 64
    assert event_hash(None, b"{}", "s") == event_hash(GENESIS_PREV, b"{}", "s")


def test_moving_bytes_between_fields_changes_the_hash() -> None:
    assert event_hash(None, b'{"a":1}x', "y") != event_hash(None, b'{"a":1}', "xy")


def test_an_intact_chain_has_no_problems(envelope_json: dict[str, Any], alice: KeyPair) -> None:
    assert verify_chain(_chain("p1", 5, envelope_json, alice)) == []


def test_interleaved_processes_are_checked_separately(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    one, two = _chain("p1", 3, envelope_json, alice), _chain("p2", 3, envelope_json, alice)
    interleaved = [link for pair in zip(one, two, strict=True) for link in pair]
    assert verify_chain(interleaved) == []


def test_an_edited_envelope_is_a_hash_mismatch_at_its_seq(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    links = _chain("p1", 4, envelope_json, alice)
    links[1] = replace(links[1], canonical_envelope=links[1].canonical_envelope.replace(b"2", b"9"))
    assert _codes(verify_chain(links)) == [("p1", 2, HASH_MISMATCH)]


def test_a_replaced_signature_is_a_hash_mismatch(
    envelope_json: dict[str, Any], alice: KeyPair, server: KeyPair
) -> None:
    links = _chain("p1", 3, envelope_json, alice)
    other = _chain("p1", 3, envelope_json, server)
    links[2] = replace(links[2], signature=other[2].signature)
    assert _codes(verify_chain(links)) == [("p1", 3, HASH_MISMATCH)]


def test_a_rehashed_edit_breaks_the_next_link(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    links = _chain("p1", 4, envelope_json, alice)
    edited = links[1].canonical_envelope.replace(b"2", b"9")
    links[1] = replace(
        links[1],
        canonical_envelope=edited,
        hash=event_hash(links[1].prev_hash, edited, links[1].signature),
    )
    assert _codes(verify_chain(links)) == [("p1", 3, PREV_HASH_MISMATCH)]


def test_a_deleted_event_is_a_seq_gap_and_a_broken_link(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    links = _chain("p1", 4, envelope_json, alice)
    del links[2]
    assert _codes(verify_chain(links)) == [("p1", 4, SEQ_GAP), ("p1", 4, PREV_HASH_MISMATCH)]


def test_reordered_events_are_reported(envelope_json: dict[str, Any], alice: KeyPair) -> None:
    links = _chain("p1", 3, envelope_json, alice)
    links[1], links[2] = links[2], links[1]
    codes = {code for _, _, code in _codes(verify_chain(links))}
    assert codes == {SEQ_GAP, PREV_HASH_MISMATCH}


def test_a_chain_must_start_at_seq_1_from_genesis(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    links = _chain("p1", 3, envelope_json, alice)
    assert _codes(verify_chain(links[1:])) == [("p1", 2, SEQ_GAP), ("p1", 2, PREV_HASH_MISMATCH)]
