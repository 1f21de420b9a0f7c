"""The signature worker (`governance/sigworker.py`): a batch's Ed25519 checks in a helper
process give exactly `verify_signature`'s verdicts; a worker that is gone is given up and
the caller checks inline."""

from __future__ import annotations

import asyncio
import base64
import io
import struct

import pytest

from stateward.governance.keys import KeyPair, L, b64url_encode, verify_signature
from stateward.governance.sigworker import SignatureWorker, serve

SMALL_ORDER_KEY = b64url_encode(bytes(32))  # the identity point: refused as a key


def _cases() -> list[tuple[str, bytes, str]]:
    """(signer, message, signature): valid ones and every kind of invalid one."""
    key, other = KeyPair.from_seed(bytes(range(32))), KeyPair.from_seed(bytes(32))
    good = [
        (key.public, f"message {n}".encode(), key.sign(f"message {n}".encode())) for n in range(8)
    ]
    sig = key.sign(b"m")
    raw = bytearray(base64.urlsafe_b64decode(sig + "=="))
    flipped = bytearray(raw)
    flipped[5] ^= 1
    s_at_l = bytes(raw[:32]) + L.to_bytes(32, "little")  # S = L: refused before libsodium
    return [
        *good,
        (key.public, b"m", b64url_encode(bytes(flipped))),  # forged
        (key.public, b"other message", sig),  # another message
        (other.public, b"m", sig),  # another signer
        (key.public, b"m", sig[:-2]),  # malformed b64url
        (key.public, b"m", b64url_encode(s_at_l)),  # S >= L
        (key.public, b"m", b64url_encode(bytes(32) + bytes(raw[32:]))),  # small-order R
        (SMALL_ORDER_KEY, b"m", sig),  # small-order public key
        (key.public, b"", key.sign(b"")),  # an empty message, valid
        (key.public, b"m", sig),  # valid
    ]


async def test_the_worker_gives_verify_signatures_verdicts() -> None:
    cases = _cases() * 3
    worker = SignatureWorker()
    try:
        verdicts = await worker.check(cases)
        assert verdicts == [verify_signature(*case) for case in cases]
        assert verdicts.count(True) == 3 * 10 and worker.checked == len(cases)
        again = await worker.check(cases[:5])  # the same process, in order
        assert again == [True] * 5
    finally:
        worker.close()


async def test_requests_in_flight_are_answered_in_order() -> None:
    cases = _cases()
    worker = SignatureWorker()
    try:
        answers = await asyncio.gather(*(worker.check(cases[n:]) for n in range(len(cases))))
        expected = [verify_signature(*case) for case in cases]
        assert answers == [expected[n:] for n in range(len(cases))]
    finally:
        worker.close()


async def test_a_dead_worker_is_given_up_and_the_caller_checks_inline() -> None:
    worker = SignatureWorker()
    assert await worker.check(_cases()[:2]) == [True, True]
    assert worker.transport is not None
    worker.transport.kill()
    for _ in range(50):
        if worker.failed is not None:
            break
        await asyncio.sleep(0.02)
    assert await worker.check(_cases()[:2]) is None  # None: check inline
    assert worker.failed is not None


def test_the_helper_loop_refuses_placeholders_and_stops_at_end_of_input() -> None:
    key = KeyPair.from_seed(bytes(range(32)))
    public = base64.urlsafe_b64decode(key.public + "=")
    sig = base64.urlsafe_b64decode(key.sign(b"m") + "==")
    request = struct.pack(">I", 3)
    request += public + sig + struct.pack(">I", 1) + b"m"  # valid
    request += bytes(32) + bytes(64) + struct.pack(">I", 0)  # placeholder: refused
    request += public + sig + struct.pack(">I", 1) + b"n"  # another message
    out = io.BytesIO()
    serve(io.BytesIO(request + b"\x00\x00"), out)  # a truncated second request: stop
    assert out.getvalue() == b"\x01\x00\x00"


@pytest.mark.parametrize("value", ["0", "off"])
def test_the_worker_can_be_turned_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from stateward.governance.sigworker import ENV, worker_enabled

    monkeypatch.setenv(ENV, value)
    assert not worker_enabled()


async def test_an_interrupt_of_the_process_group_leaves_the_worker_to_the_server() -> None:
    """Ctrl-C reaches every process of the terminal's group: the worker ignores it (the
    server shuts down and closes its stdin) instead of dying with a traceback."""
    import os
    import signal

    worker = SignatureWorker()
    try:
        assert await worker.check(_cases()[:1]) == [True]
        assert worker.transport is not None
        os.kill(worker.transport.get_pid(), signal.SIGINT)
        await asyncio.sleep(0.2)
        assert await worker.check(_cases()[:1]) == [True] and worker.failed is None
    finally:
        worker.close()
