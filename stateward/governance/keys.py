"""Ed25519 keys: base64url, key files, signing and strict (RFC 8032) verification.

An actor is an Ed25519 public key written as unpadded base64url (43 characters). Key files
are JSON `{"public": "<b64url>", "secret": "<b64url 32-byte seed>"}` with mode 0600.

`verify_signature` is strict: besides libsodium's own checks it refuses, explicitly, wrong
lengths, a scalar S >= L (the S+L malleability), public keys and R values that are not
canonical encodings of a point in the prime-order subgroup (small-order and mixed-order
points included). Honest signatures always pass; anything else is just `False`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nacl.bindings as sodium
import nacl.exceptions
import nacl.signing

from stateward.domain.errors import INVALID_INPUT, DomainError

PUBLIC_KEY_BYTES = 32
SEED_BYTES = 32
SIGNATURE_BYTES = 64
#: Order of the Ed25519 prime-order subgroup (RFC 8032 §5.1).
L = 2**252 + 27742317777372353535851937790883648493

_B64URL = re.compile(r"^[A-Za-z0-9_-]*$")


def b64url_encode(data: bytes) -> str:
    """Unpadded base64url (RFC 4648 §5) of `data`: how keys, signatures and nonces travel."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str, *, length: int | None = None) -> bytes:
    """Strictly decode unpadded base64url; `length` (bytes) is enforced when given.

    Rejects padding, characters outside `A-Z a-z 0-9 - _`, impossible lengths and
    non-canonical encodings (non-zero trailing bits), so every value has one spelling.
    Raises `DomainError(INVALID_INPUT)`.
    """
    if not isinstance(text, str) or not _B64URL.match(text) or len(text) % 4 == 1:
        raise DomainError(INVALID_INPUT, "not unpadded base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:  # pragma: no cover - regex prevents it
        raise DomainError(INVALID_INPUT, "not unpadded base64url") from exc
    if b64url_encode(data) != text:
        raise DomainError(INVALID_INPUT, "non-canonical base64url (trailing bits set)")
    if length is not None and len(data) != length:
        raise DomainError(INVALID_INPUT, f"expected {length} bytes, got {len(data)}")
    return data


def is_public_key(text: object) -> bool:
    """True when `text` is a well-formed actor key: 32 bytes of unpadded base64url."""
    if not isinstance(text, str) or len(text) != 43:
        return False
    return _well_formed_key(text)


@functools.lru_cache(maxsize=4096)
def _well_formed_key(text: str) -> bool:
    try:
        b64url_decode(text, length=PUBLIC_KEY_BYTES)
    except DomainError:
        return False
    return True


@dataclass(frozen=True)
class KeyPair:
    """An Ed25519 key pair: `public` is the actor (b64url), `secret_seed` the 32-byte seed."""

    public: str
    secret_seed: bytes = field(repr=False)

    @classmethod
    def from_seed(cls, seed: bytes) -> KeyPair:
        """The key pair a 32-byte seed determines."""
        if len(seed) != SEED_BYTES:
            raise DomainError(INVALID_INPUT, f"an Ed25519 seed is {SEED_BYTES} bytes")
        verify_key = nacl.signing.SigningKey(seed).verify_key
        return cls(public=b64url_encode(bytes(verify_key)), secret_seed=bytes(seed))

    def sign(self, message: bytes) -> str:
        """b64url Ed25519 signature of `message` by this key."""
        return sign(self.secret_seed, message)


def generate_keypair() -> KeyPair:
    """A fresh random key pair (OS randomness)."""
    return KeyPair.from_seed(os.urandom(SEED_BYTES))


def sign(seed: bytes, message: bytes) -> str:
    """Sign `message` with the key of the 32-byte `seed`; returns the b64url signature."""
    signed = _signing_key(seed).sign(message)
    return b64url_encode(signed.signature)


@functools.lru_cache(maxsize=64)
def _signing_key(seed: bytes) -> nacl.signing.SigningKey:
    """The expanded signing key of `seed`, kept: expanding it (a scalar multiplication)
    cost as much as the signature itself, and the node key signs every attested event."""
    return nacl.signing.SigningKey(seed)


#: libsodium's small-order blocklist: y-coordinates of the 8 small-order points, in
#: canonical and non-canonical (y >= p) encodings, compared with the sign bit cleared.
_SMALL_ORDER_Y = frozenset(
    bytes.fromhex(h)
    for h in (
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    )
)


def is_small_order_encoding(encoded: bytes) -> bool:
    """True when `encoded` (32 bytes) encodes one of the 8 small-order points, any spelling."""
    return encoded[:31] + bytes([encoded[31] & 0x7F]) in _SMALL_ORDER_Y


@functools.lru_cache(maxsize=4096)
def is_strict_point(encoded: bytes) -> bool:
    """True for a canonical encoding of a point in the prime-order subgroup.

    Rejects the 8 small-order points in every encoding, y >= p encodings, points that are
    not on the curve and mixed-order points (prime-order point + torsion). Cached: public
    keys repeat, and the subgroup check costs a scalar multiplication (~30 µs).
    """
    if len(encoded) != PUBLIC_KEY_BYTES or is_small_order_encoding(encoded):
        return False
    return bool(sodium.crypto_core_ed25519_is_valid_point(encoded))


@functools.lru_cache(maxsize=4096)
def _strict_public(public_b64: str) -> bytes | None:
    """The 32 bytes of a public key that is canonical, of prime order and not small
    order; None otherwise. Cached: a log has few distinct signers."""
    try:
        public = b64url_decode(public_b64, length=PUBLIC_KEY_BYTES)
    except DomainError:
        return None
    return public if is_strict_point(public) else None


def _detached_verifier() -> Callable[[bytes, bytes, bytes], bool]:
    """libsodium's `crypto_sign_verify_detached(sig, m, mlen, pk) == 0`, called directly
    (cffi, ABI mode, from the library PyNaCl ships): the very check `crypto_sign_open`
    runs, without copying signature + message into a new buffer and the message out
    again (≈ 2 µs of ≈ 57 per verification). PyNaCl's own bindings do not expose it;
    where the symbol cannot be loaded, or the self-test disagrees, `crypto_sign_open`."""

    def via_open(signature: bytes, message: bytes, public: bytes) -> bool:
        try:
            sodium.crypto_sign_open(signature + message, public)
        except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, TypeError):
            return False
        return True

    try:
        import cffi
        import nacl._sodium

        ffi = cffi.FFI()
        ffi.cdef(
            "int crypto_sign_verify_detached(const unsigned char *, const unsigned char *,"
            " unsigned long long, const unsigned char *);"
        )
        function = ffi.dlopen(nacl._sodium.__file__).crypto_sign_verify_detached

        def direct(signature: bytes, message: bytes, public: bytes) -> bool:
            return bool(function(signature, message, len(message), public) == 0)

        key = nacl.signing.SigningKey(bytes(range(32)))
        good = key.sign(b"stateward").signature
        public = bytes(key.verify_key)
        if direct(good, b"stateward", public) and not direct(good, b"stateward!", public):
            return direct
    except Exception:  # any failure to load: the portable path
        pass
    return via_open  # pragma: no cover - platforms without the exported symbol


_verify_detached = _detached_verifier()

#: Every spelling of the 8 small-order points (both sign bits): an R among them is refused.
_SMALL_ORDER_ANY = frozenset(y[:31] + bytes([y[31] | s]) for y in _SMALL_ORDER_Y for s in (0, 0x80))
_TO_STANDARD = bytes.maketrans(b"-_", b"+/")
#: The last character of a canonical 86-character b64url signature (4 low bits unset).
_SIG_LAST = frozenset("AQgw")


def _signature_bytes(sig_b64: str) -> bytes | None:
    """The 64 bytes of a strict b64url signature, None when malformed. The common case
    (86 characters of the alphabet, the last one canonical) is decoded directly; anything
    else goes through `b64url_decode`, whose verdict is the same."""
    if (
        type(sig_b64) is str
        and len(sig_b64) == 86
        and sig_b64[85] in _SIG_LAST
        and _B64URL.match(sig_b64) is not None
    ):
        return binascii.a2b_base64(sig_b64.encode("ascii").translate(_TO_STANDARD) + b"==")
    try:
        return b64url_decode(sig_b64, length=SIGNATURE_BYTES)
    except DomainError:
        return None


def verify_signature(public_b64: str, message: bytes, sig_b64: str) -> bool:
    """Strict RFC 8032 verification of a b64url signature by a b64url public key.

    Returns False (never raises) for malformed base64url, wrong lengths, S >= L,
    non-canonical/small-order/mixed-order public keys, small-order R and forged
    signatures. With A in the prime-order subgroup and S < L, libsodium's cofactorless
    check `encode([S]B - [k]A) == R` (byte comparison) also forces R to be the canonical
    encoding of a prime-order point, so R needs only the explicit small-order check.
    """
    parts = signature_parts(public_b64, message, sig_b64)
    return parts is not None and _verify_detached(parts[1], parts[2], parts[0])


def signature_parts(
    public_b64: str, message: bytes, sig_b64: str
) -> tuple[bytes, bytes, bytes] | None:
    """`verify_signature` up to libsodium's check: (public key, signature, message) as
    bytes when every strict check passed, None when one failed (the signature is then
    invalid). `verify_detached(signature, message, public)` gives the rest of the verdict
    (`sigworker` runs it in a helper process)."""
    public = _strict_public(public_b64) if isinstance(public_b64, str) else None
    if public is None:
        return None
    signature = _signature_bytes(sig_b64)
    if signature is None:
        return None
    # S >= L needs S's top byte >= 0x10 (L = 2^252 + ...): the integer only then
    if signature[63] >= 0x10 and int.from_bytes(signature[32:], "little") >= L:
        return None
    if signature[:32] in _SMALL_ORDER_ANY:
        return None
    if not isinstance(message, bytes):
        try:
            message = bytes(message)
        except TypeError:
            return None
    return public, signature, message


def verify_detached(signature: bytes, message: bytes, public: bytes) -> bool:
    """libsodium's detached check of 64 + n + 32 bytes (after `signature_parts`)."""
    return _verify_detached(signature, message, public)


def keypair_to_json(keypair: KeyPair) -> dict[str, str]:
    """The key-file JSON object of a key pair."""
    return {"public": keypair.public, "secret": b64url_encode(keypair.secret_seed)}


def keypair_from_json(obj: object, *, source: str = "key file") -> KeyPair:
    """Parse and check a key-file object: the seed must derive the stated public key."""
    if not isinstance(obj, dict) or not isinstance(obj.get("secret"), str):
        raise DomainError(INVALID_INPUT, f"{source}: expected an object with 'secret'")
    try:
        seed = b64url_decode(obj["secret"], length=SEED_BYTES)
    except DomainError as exc:
        raise DomainError(INVALID_INPUT, f"{source}: secret: {exc.message}") from exc
    keypair = KeyPair.from_seed(seed)
    if "public" in obj and obj["public"] != keypair.public:
        raise DomainError(INVALID_INPUT, f"{source}: public key does not match the secret")
    return keypair


def write_key_file(path: str | os.PathLike[str], keypair: KeyPair) -> None:
    """Write a key file with mode 0600; refuses (FileExistsError) to overwrite one.

    The file appears atomically (written to a temporary name, then hard-linked), so a
    concurrent reader never sees a half-written key.
    """
    target = Path(path)
    data = (json.dumps(keypair_to_json(keypair)) + "\n").encode("ascii")
    fd, tmp = tempfile.mkstemp(prefix=".key-", dir=target.parent or ".")
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.link(tmp, target)
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(tmp)


def read_key_file(path: str | os.PathLike[str]) -> KeyPair:
    """Read and check a key file; `DomainError(INVALID_INPUT)` when unreadable or wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DomainError(INVALID_INPUT, f"cannot read key file {path}: {exc}") from exc
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise DomainError(INVALID_INPUT, f"key file {path} is not JSON") from exc
    return keypair_from_json(obj, source=f"key file {path}")
