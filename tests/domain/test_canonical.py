"""canonical_bytes / loads_strict: RFC 8785 vectors, differential tests, strict rejections."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from stateward.domain.canonical import (
    MAX_SAFE_INTEGER,
    canonical_bytes,
    canonical_hash,
    loads_strict,
    sha256_hex,
)
from stateward.domain.errors import DomainError

# RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical serialization.
RFC8785_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), RFC8785_NUMBERS)
def test_numbers_serialize_as_rfc8785_appendix_b(bits: str, expected: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert canonical_bytes(value) == expected.encode()


def test_rfc8785_section_3_2_2_example_is_reproduced_byte_for_byte() -> None:
    text = r"""{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
      "literals": [null, true, false]
    }"""
    expected = (
        r"""{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"""
        r""""string":"€$\u000f\nA'B\"\\\\\"/"}"""
    )
    assert canonical_bytes(loads_strict(text)) == expected.encode("utf-8")


def test_keys_sort_by_utf16_code_units_as_in_rfc8785_section_3_2_3() -> None:
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    order = list(json.loads(canonical_bytes(value)).values())
    assert order == [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ]


safe_ints = st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
# U+0000 is refused (PostgreSQL cannot store it), so generated text never holds it.
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))
scalars = st.none() | st.booleans() | safe_ints | finite_floats | texts
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(texts, inner, max_size=5),
    max_leaves=30,
)
no_float_values = st.recursive(
    st.none() | st.booleans() | safe_ints | texts,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(texts, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300)
@given(json_values)
def test_canonical_bytes_agree_with_the_rfc8785_package(value: Any) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(value)


@settings(max_examples=300)
@given(json_values)
def test_canonical_bytes_parse_back_to_the_same_canonical_bytes(value: object) -> None:
    once = canonical_bytes(value)
    assert canonical_bytes(loads_strict(once)) == once


def _utf16_sorted(value: object) -> object:
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
        return {k: _utf16_sorted(value[k]) for k in keys}
    if isinstance(value, list):
        return [_utf16_sorted(v) for v in value]
    return value


@settings(max_examples=300)
@given(no_float_values)
def test_canonical_bytes_agree_with_an_independent_utf16_sorted_json_dump(value: object) -> None:
    oracle = json.dumps(_utf16_sorted(value), ensure_ascii=False, separators=(",", ":"))
    assert canonical_bytes(value) == oracle.encode("utf-8")


@given(finite_floats)
def test_every_finite_float_round_trips_through_its_canonical_form(value: float) -> None:
    assert float(canonical_bytes(value)) == value


def test_canonical_bytes_is_independent_of_key_insertion_order() -> None:
    assert canonical_bytes({"b": 1, "a": [True, None]}) == canonical_bytes(
        {"a": [True, None], "b": 1}
    )
    assert canonical_hash({"b": 1, "a": 2}) == sha256_hex(b'{"a":2,"b":1}')


@pytest.mark.parametrize(
    ("value", "pointer"),
    [
        ({"a": [1, math.nan]}, "/a/1"),
        ({"x": math.inf}, "/x"),
        ([-math.inf], "/0"),
        ({"big": 2**53}, "/big"),
        ({"big": -(2**53)}, "/big"),
        ({"a/b": {"~": 10**30}}, "/a~1b/~0"),
        ({"a": {1: "x"}}, "/a"),
        ({"s": {1, 2}}, "/s"),
        ({"b": b"bytes"}, "/b"),
        ({"lone": "\ud800"}, "/lone"),
    ],
)
def test_unrepresentable_values_are_rejected_with_a_pointer(value: object, pointer: str) -> None:
    with pytest.raises(DomainError) as err:
        canonical_bytes(value)
    assert err.value.code == "INVALID_INPUT"
    assert err.value.pointer == pointer


def test_the_safe_integer_bounds_themselves_are_accepted() -> None:
    assert canonical_bytes([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]) == (
        b"[9007199254740991,-9007199254740991]"
    )


def test_bool_is_not_treated_as_an_integer() -> None:
    assert canonical_bytes([True, False, 1, 0]) == b"[true,false,1,0]"


def test_too_deep_nesting_is_a_clear_error() -> None:
    value: object = []
    for _ in range(5000):
        value = [value]
    with pytest.raises(DomainError) as err:
        canonical_bytes(value)
    assert err.value.code == "INVALID_INPUT"


@pytest.mark.parametrize(
    ("text", "pointer"),
    [
        ('{"a": 1, "a": 2}', "/a"),
        ('{"states": {"draft": {}, "draft": {}}}', "/states/draft"),
        ('[0, {"x": [{"k": 1, "k": 1}]}]', "/1/x/0/k"),
        ('{"a~b/c": 1, "a~b/c": 1}', "/a~0b~1c"),
    ],
)
def test_duplicate_keys_are_rejected_with_a_pointer(text: str, pointer: str) -> None:
    with pytest.raises(DomainError) as err:
        loads_strict(text)
    assert err.value.code == "DUPLICATE_KEY"
    assert err.value.pointer == pointer


@pytest.mark.parametrize(
    "text",
    [
        "{",
        "",
        "[1,]",
        "NaN",
        "[Infinity]",
        '{"x": -Infinity}',
        "1e400",
        "-1e400",
        "9007199254740993",
        "-9007199254740993",
        "12345678901234567890",
        "1" * 5000,
        "1" + "0" * 309,
        "{'a': 1}",
        "\ufeff{}",
    ],
)
def test_loads_strict_rejects_what_json_or_jcs_cannot_carry(text: str) -> None:
    with pytest.raises(DomainError) as err:
        loads_strict(text)
    assert err.value.code == "INVALID_JSON"


def test_loads_strict_rejects_bytes_that_are_not_utf8() -> None:
    with pytest.raises(DomainError) as err:
        loads_strict(b'{"a": "\xff"}')
    assert err.value.code == "INVALID_JSON"


def test_loads_strict_accepts_bytes_and_large_floats() -> None:
    assert loads_strict(b'{"a": [1.5e300, 9007199254740991, "\xc3\xa9"]}') == {
        "a": [1.5e300, 9007199254740991, "é"]
    }


def test_large_integer_literals_that_a_double_holds_exactly_read_back_as_floats() -> None:
    assert loads_strict("9007199254740992") == 2.0**53
    assert isinstance(loads_strict("1152921504606846976"), float)
    assert canonical_bytes(loads_strict("[1e20, 100000000000000000000]")) == (
        b"[100000000000000000000,100000000000000000000]"
    )


# -- the orjson fast paths answer exactly as the strict parser and RFC 8785 (issue 18) ----

FAST_PATH_TEXTS = [
    '{"a":"x:y","a":1}',  # a duplicate whose dropped value held a colon
    '{"b":{"a":1,"a":1}}',
    '{"\\u003a":1,"\\u003A":2}',  # escaped colons: left to the strict parser
    '{"a":1,"\\u0061":2}',  # a duplicate spelled by an escape
    '{"a:b":"c:d","e":[":",{"f":":"}]}',
    "[9007199254740991]",
    "[9007199254740992]",
    "[9007199254740993]",
    "[18446744073709551616]",
    "[-9223372036854775809]",
    '{"n":1234567890123456}',
    '"1234567890123456789"',
    "[1e400]",
    "[1.5, -0, 0.1, 1e-400]",
    '"\\u0000"',
    '"\\ud800"',
    "NaN",
    '{"a":1,}',
    "[" * 64 + "]" * 64,
    "[" * 65 + "]" * 65,
    "[" * 300 + "]" * 300,
    '{"a":' * 65 + "1" + "}" * 65,
    '"' + "[" * 100 + '"',
    " [1] ",
    "\ufeff[1]",
    "",
]


def _outcome(parse: Any, text: str | bytes) -> tuple[Any, ...]:
    try:
        value = parse(text)
    except DomainError as error:
        return ("refused", error.code, error.message, error.pointer)
    return ("parsed", json.dumps(value, sort_keys=True), repr(type(value)))


@pytest.mark.parametrize("text", FAST_PATH_TEXTS)
def test_loads_strict_fast_path_answers_as_the_strict_parser(text: str) -> None:
    from stateward.domain.canonical import _strict_loads

    for form in (text, text.encode("utf-8")):
        assert _outcome(loads_strict, form) == _outcome(_strict_loads, form)


_KEYS = st.sampled_from(["a", "b", "a:b", ":", "é", "\u2028"])
_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**65), 2**65), st.floats(allow_nan=False),
    st.text(alphabet=st.sampled_from(["a", ":", '"', "\\", "\x01", "é", "😀", "1"]), max_size=6),
)  # fmt: skip


def _text_of(value: Any) -> str:
    """JSON text of a tree whose objects are lists of pairs (so keys may repeat)."""
    if isinstance(value, tuple):
        return "{" + ",".join(json.dumps(k) + ":" + _text_of(v) for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_text_of(v) for v in value) + "]"
    return json.dumps(value)


_PAIR_TREES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(st.tuples(_KEYS, inner), max_size=4).map(tuple),
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_PAIR_TREES)
def test_loads_strict_fast_path_agrees_on_generated_text(tree: Any) -> None:
    from stateward.domain.canonical import _strict_loads

    text = _text_of(tree)
    assert _outcome(loads_strict, text) == _outcome(_strict_loads, text)
    assert _outcome(loads_strict, text.encode()) == _outcome(_strict_loads, text.encode())
