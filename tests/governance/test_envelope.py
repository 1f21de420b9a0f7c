"""Envelopes: strict shape, canonical bytes, identity and timestamps."""

from __future__ import annotations

import copy
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from stateward.domain.canonical import canonical_bytes, sha256_hex
from stateward.domain.errors import DomainError
from stateward.governance.envelope import (
    NONCE_BYTES,
    NONCE_TIME_BYTES,
    Envelope,
    SignedEnvelope,
    build_envelope,
    format_ts,
    is_valid_actor,
    new_nonce,
    parse_ts,
)
from stateward.governance.keys import KeyPair, b64url_decode, b64url_encode
from stateward.governance.verification import sign_envelope

NOW = datetime(2026, 11, 30, 2, 21, 9, 123000, tzinfo=UTC)
NET = "net-test-1"  # matches the envelope_json fixture


def test_an_envelope_round_trips_through_json(envelope_json: dict[str, Any]) -> None:
    envelope = Envelope.from_json(envelope_json)
    assert envelope.to_json() == envelope_json
    assert envelope.action.name == "approve"
    assert envelope.timestamp == NOW


def test_canonical_bytes_are_rfc8785_of_the_envelope(envelope_json: dict[str, Any]) -> None:
    envelope = Envelope.from_json(envelope_json)
    assert envelope.canonical() == canonical_bytes(envelope_json)
    assert envelope.canonical().startswith(b'{"action":{"input":{"amount":10}')


def test_identity_ignores_key_order_and_never_covers_the_signature(
    envelope_json: dict[str, Any], alice: KeyPair, server: KeyPair
) -> None:
    reordered = dict(reversed(list(envelope_json.items())))
    one, two = Envelope.from_json(envelope_json), Envelope.from_json(reordered)
    assert one.identity() == two.identity() == sha256_hex(canonical_bytes(envelope_json))
    assert sign_envelope(one, alice).signature != sign_envelope(one, server).signature
    assert sign_envelope(one, alice).envelope.identity() == one.identity()


def test_identity_changes_with_any_field(envelope_json: dict[str, Any]) -> None:
    base = Envelope.from_json(envelope_json).identity()
    changed = copy.deepcopy(envelope_json)
    changed["action"]["input"]["amount"] = 11
    assert Envelope.from_json(changed).identity() != base


def test_signed_bytes_do_not_follow_later_edits_of_the_input(
    envelope_json: dict[str, Any],
) -> None:
    envelope = Envelope.from_json(envelope_json)
    before = envelope.canonical()
    envelope_json["action"]["input"]["amount"] = 10_000
    assert envelope.canonical() == before


def _mutated(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    *parents, last = path.split("/")
    target = obj
    for key in parents:
        target = target[key]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return obj


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "pointer"),
    [
        ("v", _DELETE, "/v"),
        ("v", 2, "/v"),
        ("v", True, "/v"),
        ("v", 1.0, "/v"),
        ("net", "", "/net"),
        ("net", 7, "/net"),
        ("net", "has space", "/net"),
        ("process", None, "/process"),
        ("extra", 1, "/extra"),
        ("action", [], "/action"),
        ("action/name", _DELETE, "/action/name"),
        ("action/workflow", "", "/action/workflow"),
        ("action/input", [], "/action/input"),
        ("action/extra", 1, "/action/extra"),
        ("actor", "bob", "/actor"),
        ("actor", "visitor:ABCDEF0123456789", "/actor"),
        ("actor", "visitor:0123", "/actor"),
        ("ts", "2026-11-30 02:21:09Z", "/ts"),
        ("ts", "2026-11-30T02:21:09.123+00:00", "/ts"),
        ("ts", "2026-11-30T02:21:09.123z", "/ts"),
        ("ts", "2026-13-30T02:21:09.123Z", "/ts"),
        ("ts", "2026-11-30T02:21:60.000Z", "/ts"),
        ("ts", 1764469269, "/ts"),
        ("nonce", "AAAA", "/nonce"),
        ("nonce", "AAECAwQFBgcICQoLDA0ODw==", "/nonce"),
        ("nonce", "AAECAwQFBgcICQoLDA0OD+", "/nonce"),
        ("nonce", "A" * 100, "/nonce"),
    ],
)
def test_malformed_envelopes_are_invalid_input_with_a_pointer(
    envelope_json: dict[str, Any], path: str, value: Any, pointer: str
) -> None:
    with pytest.raises(DomainError) as err:
        Envelope.from_json(_mutated(envelope_json, path, value))
    assert err.value.code == "INVALID_INPUT"
    assert err.value.pointer == pointer


@pytest.mark.parametrize(
    ("value", "pointer"),
    [
        (float("nan"), "/action/input/x"),
        (float("inf"), "/action/input/x"),
        (2**53, "/action/input/x"),
        ({"deep": [1, -(2**60)]}, "/action/input/x/deep/1"),
    ],
)
def test_unrepresentable_input_is_rejected_at_parse_time(
    envelope_json: dict[str, Any], value: Any, pointer: str
) -> None:
    envelope_json["action"]["input"]["x"] = value
    with pytest.raises(DomainError) as err:
        Envelope.from_json(envelope_json)
    assert (err.value.code, err.value.pointer) == ("INVALID_INPUT", pointer)


def test_a_non_object_is_not_an_envelope() -> None:
    with pytest.raises(DomainError) as err:
        Envelope.from_json([1, 2])
    assert err.value.code == "INVALID_INPUT"


def test_build_envelope_draws_a_fresh_nonce_and_formats_ts(alice: KeyPair) -> None:
    one = build_envelope(NET, "p-1", "$start", "a/b", {"data": {}}, alice.public, NOW)
    two = build_envelope(NET, "p-1", "$start", "a/b", {"data": {}}, alice.public, NOW)
    assert one.nonce != two.nonce
    assert len(b64url_decode(one.nonce)) == NONCE_TIME_BYTES + NONCE_BYTES
    assert one.ts == "2026-11-30T02:21:09.123Z"
    assert one.identity() != two.identity()


def test_special_actors_are_accepted(alice: KeyPair) -> None:
    assert is_valid_actor("system")
    assert is_valid_actor("visitor:0123456789abcdef")
    assert is_valid_actor(alice.public)
    assert not is_valid_actor("visitor:0123456789abcdeg")
    assert not is_valid_actor("System")


def test_format_ts_writes_utc_with_milliseconds() -> None:
    plus_two = timezone(timedelta(hours=2))
    moment = datetime(2026, 11, 30, 4, 21, 9, 123999, tzinfo=plus_two)
    assert format_ts(moment) == "2026-11-30T02:21:09.123Z"
    assert format_ts(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000Z"


def test_parse_ts_accepts_zero_to_six_fraction_digits() -> None:
    assert parse_ts("2026-11-30T02:21:09Z") == datetime(2026, 11, 30, 2, 21, 9, tzinfo=UTC)
    assert parse_ts("2026-11-30T02:21:09.5Z").microsecond == 500000
    assert parse_ts("2026-11-30T02:21:09.123456Z").microsecond == 123456
    with pytest.raises(DomainError):
        parse_ts("2026-11-30T02:21:09.1234567Z")


@pytest.mark.parametrize(
    "text",
    [
        "２０２６-11-30T02:21:09Z",  # full-width digits: int() reads them as 2026
        "2026-11-30T02:21:0٩Z",  # an Arabic-Indic nine
        "2026-11-30T02:21:60Z",  # a leap second
        "2026-02-30T02:21:09Z",  # no such day
        "2026-11-30t02:21:09Z",
        "2026-11-30T02:21:09z",
        "2026-11-30T02:21:09+00:00",
        "2026-11-30 02:21:09Z",
        "2026-11-30T02:21:09.Z",
        "2026-11-30T02:21:09Z\n",
        20261130,
    ],
)
def test_parse_ts_has_one_spelling_per_instant(text: object) -> None:
    with pytest.raises(DomainError) as refused:
        parse_ts(text)  # type: ignore[arg-type]
    assert refused.value.code == "INVALID_INPUT"


def test_new_nonce_is_the_time_in_milliseconds_then_16_random_bytes(
    envelope_json: dict[str, Any],
) -> None:
    """The time prefix keeps the (actor, nonce) index's inserts together; the random
    bytes keep nonces unique within one millisecond; the server takes it as any nonce."""
    before = int(time.time() * 1000)
    raw = [b64url_decode(new_nonce()) for _ in range(100)]
    after = int(time.time() * 1000)
    assert all(len(r) == NONCE_TIME_BYTES + NONCE_BYTES == 22 for r in raw)
    assert all(before <= int.from_bytes(r[:NONCE_TIME_BYTES], "big") <= after for r in raw)
    assert len({r[NONCE_TIME_BYTES:] for r in raw}) == 100  # unique random parts
    # nonces made in one millisecond share their first characters: neighbours in the index
    assert len({b64url_encode(r)[:7] for r in raw}) <= 2
    nonce = b64url_encode(raw[0])
    assert Envelope.from_json({**envelope_json, "nonce": nonce}).nonce == nonce


def test_signed_envelope_round_trips_and_checks_its_signer_and_signature(
    envelope_json: dict[str, Any], alice: KeyPair
) -> None:
    signed = sign_envelope(Envelope.from_json(envelope_json), alice)
    again = SignedEnvelope.from_json(signed.to_json())
    assert again == signed
    for key, bad in (("signer", "system"), ("signature", "AAAA"), ("signature", 5)):
        obj = signed.to_json()
        obj[key] = bad
        with pytest.raises(DomainError) as err:
            SignedEnvelope.from_json(obj)
        assert err.value.pointer == f"/{key}"
    with pytest.raises(DomainError):
        SignedEnvelope.from_json({"event": envelope_json, "signer": alice.public})


def _stored_case(input: dict) -> str:
    from stateward.governance.envelope import build_envelope

    env = build_envelope("net1", "p1", "act", "a/b/c", input, "system", "2026-01-01T00:00:00.000Z")
    return env.canonical().decode("utf-8")


def test_from_stored_reads_canonical_text_exactly_like_the_strict_parser() -> None:
    import json as _json

    from stateward.domain.canonical import loads_strict
    from stateward.governance.envelope import Envelope

    cases = ({"a": 1, "b": "x\u2028\n\u00e9"}, {"f": 1.5, "big": 2**53 - 1},
             {"\U0001f600": 1, "\ue000": 2}, {"nested": [{"z": None, "a": True}]})  # fmt: skip
    for input in cases:
        text = _stored_case(input)
        fast, slow = Envelope.from_stored(text), Envelope.from_json(loads_strict(text))
        assert fast == slow and fast.canonical() == slow.canonical() == text.encode()
    text = _stored_case({"a": 1})
    spaced = _json.dumps(_json.loads(text), indent=1)
    assert Envelope.from_stored(spaced).canonical() != spaced.encode()
    for bad in (text.replace('"a":1', '"a":NaN'), text.replace('"a":1', '"a":9007199254740993')):
        with pytest.raises(DomainError):
            Envelope.from_stored(bad)


def test_stored_fields_accepts_only_what_the_strict_parser_accepts_as_canonical() -> None:
    """The one-pass check of the offline verifier (`stored_fields`) never accepts text
    that `from_json(loads_strict(text))` refuses or that is not its RFC 8785 form, and it
    accepts the ordinary canonical envelope with the strict parser's fields."""
    import json as _json

    from stateward.domain.canonical import loads_strict
    from stateward.governance.envelope import stored_fields

    good = _stored_case({"a": 1, "b": "x\u2028\n\u00e9\u007f", "l": [True, None, -5]})
    fields = stored_fields(good, good.encode())
    strict = Envelope.from_json(loads_strict(good))
    assert fields is not None and Envelope.from_fields(fields, good.encode()) == strict
    assert strict.canonical() == good.encode()
    obj = _json.loads(good)

    def variant(change: Any) -> str:
        copy_ = copy.deepcopy(obj)
        change(copy_)
        return _json.dumps(copy_, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    deep: Any = 1
    for _ in range(70):
        deep = [deep]
    texts = [
        _stored_case({"f": 1.5}), _stored_case({"f": 1.0}),
        good.replace('"a":1,', '"a":9007199254740993,'),
        _stored_case({"\U0001f600": 1, "\ue000": 2}),
        good.replace("\u00e9", "\\u00e9"), _json.dumps(obj), _json.dumps(obj, sort_keys=True),
        good.replace('"a":1,', '"a":1,"a":1,'), good.replace('{"a":1', '{"a":1.0'),
        variant(lambda o: o.update(ts="2026-02-30T00:00:00.000Z")),
        variant(lambda o: o.update(ts="2026-11-30T24:00:00.000Z")),
        variant(lambda o: o.update(nonce="AAECAwQFBgcICQoLDA0ODx")),  # trailing bits set
        variant(lambda o: o.update(nonce="AAECAwQFBgcICQoLDA0O")),  # 15 bytes
        variant(lambda o: o.update(actor="visitor:XYZ")), variant(lambda o: o.update(v=2)),
        variant(lambda o: o.update(extra=1)), variant(lambda o: o["action"].update(name="")),
        variant(lambda o: o.update(process="bad id")), variant(lambda o: o.update(net=1)),
        variant(lambda o: o["action"].update(input=[])),
        variant(lambda o: o["action"]["input"].update(deep=deep)), "[]", "{",
    ]  # fmt: skip
    for text in texts:
        raw = text.encode("utf-8", "surrogatepass")
        fields = stored_fields(text, raw)
        if fields is None:
            continue
        envelope = Envelope.from_json(loads_strict(text))  # accepted: the strict one too
        assert envelope.canonical() == raw, text
        assert Envelope.from_fields(fields, raw) == envelope, text
    assert stored_fields(_stored_case({"f": 1.5}), _stored_case({"f": 1.5}).encode()) is None
    nul = _stored_case({"nul": "a"}).replace('"a"', '"a\\u0000"')
    with pytest.raises(DomainError):  # the strict parser's verdict, on the stored path too
        Envelope.from_stored(nul)
