"""Ed25519 keys: strict base64url, key files and strict RFC 8032 signature verification."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path

import nacl.bindings as sodium
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stateward.domain.errors import DomainError
from stateward.governance.keys import (
    KeyPair,
    L,
    b64url_decode,
    b64url_encode,
    generate_keypair,
    is_public_key,
    is_small_order_encoding,
    is_strict_point,
    read_key_file,
    sign,
    verify_signature,
    write_key_file,
)
from stateward.governance.node_key import load_or_create_node_key

# The 8 small-order points (libsodium's blocklist), plus non-canonical encodings (y >= p)
# and sign-bit variants of them. None may ever act as a public key or as R.
SMALL_ORDER = [
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000080",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "0100000000000000000000000000000000000000000000000000000000000080",
]
ORDER_8_POINT = bytes.fromhex(SMALL_ORDER[2])

# RFC 8032 §7.1 TEST 1 and TEST 2.
RFC8032_VECTORS = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
]


def _b(h: str) -> str:
    return b64url_encode(bytes.fromhex(h))


# ---------------------------------------------------------------------- base64url


@given(st.binary(max_size=100))
def test_b64url_round_trips_without_padding(data: bytes) -> None:
    text = b64url_encode(data)
    assert "=" not in text
    assert b64url_decode(text) == data


@pytest.mark.parametrize(
    "text",
    ["AA==", "AA=", "a+b/", "ab cd", "A", "AAAAA", "AB", "AAB", "é"],
)
def test_b64url_decode_rejects_padding_bad_alphabet_lengths_and_trailing_bits(text: str) -> None:
    with pytest.raises(DomainError) as err:
        b64url_decode(text)
    assert err.value.code == "INVALID_INPUT"


def test_b64url_decode_enforces_the_expected_length() -> None:
    with pytest.raises(DomainError):
        b64url_decode(b64url_encode(bytes(31)), length=32)


def test_is_public_key_wants_exactly_32_bytes_of_b64url() -> None:
    assert is_public_key(generate_keypair().public)
    assert not is_public_key(b64url_encode(bytes(31)))
    assert not is_public_key(b64url_encode(bytes(33)))
    assert not is_public_key("system")
    assert not is_public_key(None)


# ---------------------------------------------------------------------- signatures


@pytest.mark.parametrize(("seed", "public", "message", "signature"), RFC8032_VECTORS)
def test_rfc8032_test_vectors_sign_and_verify(
    seed: str, public: str, message: str, signature: str
) -> None:
    keypair = KeyPair.from_seed(bytes.fromhex(seed))
    assert keypair.public == _b(public)
    assert sign(keypair.secret_seed, bytes.fromhex(message)) == _b(signature)
    assert verify_signature(_b(public), bytes.fromhex(message), _b(signature))


@given(st.binary(max_size=200))
def test_honest_signatures_always_verify(message: bytes) -> None:
    keypair = generate_keypair()
    assert verify_signature(keypair.public, message, keypair.sign(message))


def test_a_forged_signature_is_rejected() -> None:
    alice, mallory = generate_keypair(), generate_keypair()
    message = b"transfer 10"
    good = alice.sign(message)
    assert not verify_signature(alice.public, message, mallory.sign(message))
    assert not verify_signature(alice.public, b"transfer 1000", good)
    flipped = bytearray(b64url_decode(good))
    flipped[5] ^= 1
    assert not verify_signature(alice.public, message, b64url_encode(bytes(flipped)))


def test_s_plus_l_malleability_is_rejected() -> None:
    keypair = generate_keypair()
    raw = b64url_decode(keypair.sign(b"m"))
    s = int.from_bytes(raw[32:], "little")
    malleated = raw[:32] + (s + L).to_bytes(32, "little")
    assert not verify_signature(keypair.public, b"m", b64url_encode(malleated))


@pytest.mark.parametrize("s", [L, L + 1, 2**253, 2**256 - 1])
def test_any_scalar_s_at_or_above_l_is_rejected(s: int) -> None:
    keypair = generate_keypair()
    raw = b64url_decode(keypair.sign(b"m"))
    assert not verify_signature(
        keypair.public, b"m", b64url_encode(raw[:32] + s.to_bytes(32, "little"))
    )


@pytest.mark.parametrize("point", SMALL_ORDER)
def test_small_order_public_keys_cannot_sign_anything(point: str) -> None:
    # The identity trick: with A and R of small order and S = 0, a lax verifier's equation
    # [S]B = R + [k]A holds for every message.
    public = bytes.fromhex(point)
    for r in (public, bytes.fromhex(SMALL_ORDER[1])):
        assert not verify_signature(b64url_encode(public), b"any", b64url_encode(r + bytes(32)))


@pytest.mark.parametrize("point", SMALL_ORDER)
def test_small_order_r_is_rejected(point: str) -> None:
    keypair = generate_keypair()
    raw = b64url_decode(keypair.sign(b"m"))
    forged = bytes.fromhex(point) + raw[32:]
    assert not verify_signature(keypair.public, b"m", b64url_encode(forged))


def _mixed_order_signature() -> tuple[str, bytes, str]:
    """A signature valid under A' = A + T (T of order 8), a key libsodium alone accepts."""
    seed = bytes(range(32))
    h = hashlib.sha512(seed).digest()
    clamped = bytearray(h[:32])
    clamped[0] &= 248
    clamped[31] &= 127
    clamped[31] |= 64
    a = int.from_bytes(clamped, "little")
    public = sodium.crypto_scalarmult_ed25519_base_noclamp(bytes(clamped))
    mixed = sodium.crypto_core_ed25519_add(public, ORDER_8_POINT)
    for i in range(1000):
        message = b"msg %d" % i
        r = int.from_bytes(hashlib.sha512(b"nonce" + message).digest(), "little") % L
        r_point = sodium.crypto_scalarmult_ed25519_base_noclamp(r.to_bytes(32, "little"))
        k = int.from_bytes(hashlib.sha512(r_point + mixed + message).digest(), "little") % L
        if k % 8 == 0:  # then [k]T vanishes and the equation holds under A'
            s = (r + k * a) % L
            return b64url_encode(mixed), message, b64url_encode(r_point + s.to_bytes(32, "little"))
    raise AssertionError("no suitable message found")  # pragma: no cover


def test_mixed_order_public_key_is_rejected_although_libsodium_alone_accepts_it() -> None:
    public, message, signature = _mixed_order_signature()
    raw_sig = b64url_decode(signature)
    sodium.crypto_sign_open(raw_sig + message, b64url_decode(public))  # libsodium: valid
    assert not verify_signature(public, message, signature)


@pytest.mark.parametrize(
    ("public_len", "sig_len"), [(31, 64), (33, 64), (0, 64), (32, 63), (32, 65), (32, 0)]
)
def test_wrong_key_and_signature_lengths_are_rejected(public_len: int, sig_len: int) -> None:
    keypair = generate_keypair()
    raw_pub = b64url_decode(keypair.public)
    raw_sig = b64url_decode(keypair.sign(b"m"))
    public = (raw_pub + bytes(1))[:public_len]
    signature = (raw_sig + bytes(1))[:sig_len]
    assert not verify_signature(b64url_encode(public), b"m", b64url_encode(signature))


def test_non_canonical_base64_of_a_valid_signature_is_rejected() -> None:
    keypair = generate_keypair()
    signature = keypair.sign(b"m")
    assert not verify_signature(keypair.public, b"m", signature + "==")
    message = next(m for m in (b"m%d" % i for i in range(1000)) if "-" in keypair.sign(m))
    std_alphabet = keypair.sign(message).replace("-", "+").replace("_", "/")
    assert not verify_signature(keypair.public, message, std_alphabet)
    # 64 bytes -> 86 characters: the last one carries 4 unused bits, which must be zero.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    tweaked = signature[:-1] + alphabet[alphabet.index(signature[-1]) | 1]
    assert not verify_signature(keypair.public, b"m", tweaked)


def test_garbage_inputs_return_false_instead_of_raising() -> None:
    assert not verify_signature("not base64!", b"m", "x")
    assert not verify_signature(generate_keypair().public, b"m", "@@@")


# ---------------------------------------------------------------------- key files


def test_key_file_is_written_with_mode_0600_and_reads_back(tmp_path: Path) -> None:
    keypair = generate_keypair()
    path = tmp_path / "alice.json"
    write_key_file(path, keypair)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_key_file(path) == keypair
    assert os.listdir(tmp_path) == ["alice.json"]


def test_key_file_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    first = generate_keypair()
    write_key_file(path, first)
    with pytest.raises(FileExistsError):
        write_key_file(path, generate_keypair())
    assert read_key_file(path) == first


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[]",
        '{"public": "x"}',
        '{"secret": "AAAA"}',
        '{"secret": "'
        + b64url_encode(bytes(32))
        + '", "public": "'
        + b64url_encode(bytes(32))
        + '"}',
    ],
)
def test_bad_key_files_are_rejected_clearly(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(DomainError) as err:
        read_key_file(path)
    assert err.value.code == "INVALID_INPUT"
    assert "bad.json" in err.value.message


def test_missing_key_file_is_a_domain_error(tmp_path: Path) -> None:
    with pytest.raises(DomainError) as err:
        read_key_file(tmp_path / "nope.json")
    assert err.value.code == "INVALID_INPUT"


def test_the_secret_seed_never_shows_in_repr() -> None:
    keypair = generate_keypair()
    assert b64url_encode(keypair.secret_seed) not in repr(keypair)
    assert str(keypair.secret_seed) not in repr(keypair)


def test_node_key_is_created_once_then_loaded(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "node.json"
    created = load_or_create_node_key(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_or_create_node_key(path) == created


def test_nodes_starting_together_agree_on_one_node_key(tmp_path: Path) -> None:
    path = tmp_path / "node.json"
    results: list[KeyPair] = []
    barrier = threading.Barrier(8)

    def start() -> None:
        barrier.wait()
        results.append(load_or_create_node_key(path))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({k.public for k in results}) == 1
    assert read_key_file(path).public == results[0].public


def test_a_mixed_order_r_is_rejected() -> None:
    keypair = generate_keypair()
    raw = b64url_decode(keypair.sign(b"m"))
    mixed_r = sodium.crypto_core_ed25519_add(raw[:32], ORDER_8_POINT)
    assert not verify_signature(keypair.public, b"m", b64url_encode(mixed_r + raw[32:]))


@pytest.mark.parametrize("point", SMALL_ORDER)
def test_every_small_order_encoding_is_recognised(point: str) -> None:
    assert is_small_order_encoding(bytes.fromhex(point))
    assert not is_strict_point(bytes.fromhex(point))


def test_non_canonical_public_key_encodings_are_rejected() -> None:
    # y = p + 2 (non-canonical spelling of y = 2) — never a valid key encoding.
    y = 2**255 - 19 + 2
    assert not is_strict_point(y.to_bytes(32, "little"))


def test_the_direct_libsodium_check_is_used_and_agrees_with_crypto_sign_open() -> None:
    """`verify_signature` calls libsodium's `crypto_sign_verify_detached` directly (the
    check `crypto_sign_open` runs, without its copies); it must give the same verdict."""
    import os

    import nacl.bindings
    import nacl.exceptions

    from stateward.governance import keys

    assert keys._verify_detached.__name__ == "direct"
    key = generate_keypair()
    public = b64url_decode(key.public)
    for size in (0, 1, 64, 300, 5000):
        message = os.urandom(size)
        signature = b64url_decode(key.sign(message))
        for sig, msg in ((signature, message), (signature, message + b"x"),
                         (bytes([signature[0] ^ 1]) + signature[1:], message)):  # fmt: skip
            try:
                nacl.bindings.crypto_sign_open(sig + msg, public)
                expected = True
            except nacl.exceptions.BadSignatureError:
                expected = False
            assert keys._verify_detached(sig, msg, public) is expected
