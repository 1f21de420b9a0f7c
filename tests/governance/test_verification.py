"""verify_envelope: forged, foreign, untrusted, revoked, stale and future envelopes."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from stateward.domain.canonical import loads_strict
from stateward.domain.errors import DomainError
from stateward.governance.envelope import Envelope, SignedEnvelope
from stateward.governance.keys import KeyPair, b64url_decode, b64url_encode, generate_keypair
from stateward.governance.verification import resubmission, sign_envelope, verify_envelope

NOW = datetime(2026, 11, 30, 2, 21, 9, 123000, tzinfo=UTC)
NET = "net-test-1"  # matches the envelope_json fixture


def _verify(signed: SignedEnvelope, *, now: datetime | None = NOW, **kw: Any) -> None:
    kw.setdefault("net", NET)
    kw.setdefault("trusted_signers", ())
    verify_envelope(signed, now=now, **kw)


def _reason(signed: SignedEnvelope, **kw: Any) -> str:
    with pytest.raises(DomainError) as err:
        _verify(signed, **kw)
    assert err.value.code == "BAD_SIGNATURE"
    return str(err.value.details["reason"])


def _signed(obj: dict[str, Any], key: KeyPair) -> SignedEnvelope:
    return sign_envelope(Envelope.from_json(obj), key)


def test_a_self_signed_envelope_verifies(envelope_json: dict[str, Any], alice: KeyPair) -> None:
    _verify(_signed(envelope_json, alice))


def test_a_forged_signature_is_bad_signature(envelope_json: dict[str, Any], alice: KeyPair) -> None:
    signed = _signed(envelope_json, alice)
    raw = bytearray(b64url_decode(signed.signature))
    raw[0] ^= 0x40
    forged = SignedEnvelope(signed.envelope, signed.signer, b64url_encode(bytes(raw)))
    assert _reason(forged) == "forged"


def test_a_signature_moved_onto_other_content_is_bad_signature(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    signed = _signed(envelope_json, alice)
    envelope_json["action"]["input"]["amount"] = 1_000_000
    tampered = SignedEnvelope(Envelope.from_json(envelope_json), signed.signer, signed.signature)
    assert _reason(tampered) == "forged"


def test_an_envelope_for_another_deployment_is_rejected(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    signed = _signed(envelope_json, alice)
    assert _reason(signed, net="another-deployment") == "wrong_net"


def test_a_signer_that_is_not_the_actor_needs_to_be_trusted(
    envelope_json: dict[str, Any], server: KeyPair
) -> None:
    mallory = generate_keypair()
    assert _reason(_signed(envelope_json, mallory)) == "untrusted_signer"
    assert _reason(_signed(envelope_json, mallory), trusted_signers={server.public}) == (
        "untrusted_signer"
    )


def test_a_trusted_server_key_may_sign_for_a_key_actor(
    envelope_json: dict[str, Any], server: KeyPair
) -> None:
    _verify(_signed(envelope_json, server), trusted_signers={server.public})


@pytest.mark.parametrize("actor", ["system", "visitor:0123456789abcdef"])
def test_system_and_visitors_must_be_signed_by_a_trusted_server_key(
    envelope_json: dict[str, Any], server: KeyPair, actor: str
) -> None:
    envelope_json["actor"] = actor
    signed = _signed(envelope_json, server)
    _verify(signed, trusted_signers={server.public})
    assert _reason(signed) == "untrusted_signer"
    assert _reason(_signed(envelope_json, generate_keypair())) == "untrusted_signer"


def test_a_revoked_signer_key_is_rejected_and_sees_the_envelope_time(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    asked: list[tuple[str, str]] = []

    def revoked(key: str, ts: str) -> bool:
        asked.append((key, ts))
        return key == alice.public

    signed = _signed(envelope_json, alice)
    with pytest.raises(DomainError) as err:
        _verify(signed, revoked=revoked)
    assert err.value.code == "BAD_SIGNATURE"
    assert "key revoked" in err.value.message
    assert asked == [(alice.public, envelope_json["ts"])]


def test_history_signed_before_a_revocation_still_verifies(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    revoked_at = "2026-12-01T00:00:00.000Z"
    signed = _signed(envelope_json, alice)
    _verify(signed, now=None, revoked=lambda key, ts: ts >= revoked_at)


def test_a_server_cannot_attest_for_a_revoked_actor(
    envelope_json: dict[str, Any], alice: KeyPair, server: KeyPair
) -> None:
    signed = _signed(envelope_json, server)
    reason = _reason(
        signed, trusted_signers={server.public}, revoked=lambda key, ts: key == alice.public
    )
    assert reason == "revoked"


@pytest.mark.parametrize(
    ("skew", "accepted"),
    [
        (timedelta(seconds=0), True),
        (timedelta(seconds=300), True),
        (timedelta(seconds=-300), True),
        (timedelta(seconds=300, milliseconds=1), False),
        (timedelta(seconds=-300, milliseconds=-1), False),
        (timedelta(hours=-1), False),
        (timedelta(days=1), False),
    ],
)
def test_timestamps_are_accepted_within_300_seconds_inclusive(
    envelope_json: dict[str, Any], alice: KeyPair, skew: timedelta, accepted: bool
) -> None:
    signed = _signed(envelope_json, alice)
    server_now = NOW - skew  # ts = NOW, so ts - server_now = skew
    if accepted:
        _verify(signed, now=server_now)
    else:
        reason = _reason(signed, now=server_now)
        assert reason == ("future" if skew > timedelta(0) else "stale")


def test_stale_and_future_messages_say_so(envelope_json: dict[str, Any], alice: KeyPair) -> None:
    signed = _signed(envelope_json, alice)
    for now, word in (
        (NOW + timedelta(minutes=10), "stale"),
        (NOW - timedelta(minutes=10), "future"),
    ):
        with pytest.raises(DomainError) as err:
            _verify(signed, now=now)
        assert word in err.value.message


def test_reverifying_the_stored_log_skips_the_clock(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    _verify(_signed(envelope_json, alice), now=None)


def test_duplicate_keys_are_rejected_before_any_signature_check(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    # The signature is valid for {"amount": 10}; a parser keeping the last duplicate would
    # act on 1000000. The text never reaches signature verification.
    wire = json.dumps(_signed(envelope_json, alice).to_json())
    smuggled = wire.replace('"amount": 10', '"amount": 10, "amount": 1000000')
    with pytest.raises(DomainError) as err:
        loads_strict(smuggled)
    assert (err.value.code, err.value.pointer) == ("DUPLICATE_KEY", "/event/action/input/amount")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "9007199254740993"])
def test_unrepresentable_numbers_are_rejected_before_any_signature_check(
    envelope_json: dict[str, Any], alice: KeyPair, literal: str
) -> None:
    wire = json.dumps(_signed(envelope_json, alice).to_json())
    with pytest.raises(DomainError) as err:
        loads_strict(wire.replace('"amount": 10', f'"amount": {literal}'))
    assert err.value.code == "INVALID_JSON"


def test_a_wire_envelope_verifies_after_strict_parsing(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    wire = json.dumps(_signed(envelope_json, alice).to_json(), indent=2)
    _verify(SignedEnvelope.from_json(loads_strict(wire)))


def test_resubmitting_the_same_envelope_is_a_duplicate_and_other_content_is_replayed(
    envelope_json: dict[str, Any],
) -> None:
    original = Envelope.from_json(envelope_json)
    assert resubmission(original, None) == "new"
    assert resubmission(Envelope.from_json(copy.deepcopy(envelope_json)), original.identity()) == (
        "duplicate"
    )
    envelope_json["action"]["input"]["amount"] = 11
    with pytest.raises(DomainError) as err:
        resubmission(Envelope.from_json(envelope_json), original.identity())
    assert err.value.code == "REPLAYED"
