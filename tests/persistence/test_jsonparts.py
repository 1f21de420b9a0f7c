"""`FragmentMemo.dump` gives exactly the text of one `orjson.dumps` of the data, reusing
the text of a large top-level value only while the data holds that very object; padded
(SQLite), the same text with trailing spaces that keep the row's length through small
edits."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from stateward.persistence.db import dumps_json
from stateward.persistence.jsonparts import (
    LARGE,
    PAD_MIN,
    PAD_SHARE,
    FragmentMemo,
    padded,
    padded_length,
)
from stateward.persistence.types import JsonText

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
BIG = [{"id": i, "name": f"item-{i}", "note": "n" * 48} for i in range(200)]


def _plain(data: dict[str, Any]) -> str:
    return orjson.dumps(data).decode()


@given(
    first=st.dictionaries(st.text(), VALUES, max_size=6),
    changes=st.dictionaries(st.text(), VALUES, max_size=3),
)
def test_the_text_is_orjsons_whatever_changed(first, changes):  # type: ignore[no-untyped-def]
    memo = FragmentMemo()
    data = {"items": BIG, **first}
    assert memo.dump("p", data, LARGE) == _plain(data)
    after = {**data, **changes}  # shares every value `changes` did not replace
    assert memo.dump("p", after, LARGE) == _plain(after)
    assert json.loads(memo.dump("p", after, LARGE)) == after


def test_a_large_value_kept_is_not_dumped_again_a_replaced_one_is():
    memo = FragmentMemo()
    memo.dump("p", {"items": BIG, "n": 1}, LARGE)
    dumped = memo.dumped
    assert memo.dump("p", {"items": BIG, "n": 2}, LARGE) == _plain({"items": BIG, "n": 2})
    assert memo.dumped == dumped + 1 and memo.reused == 1  # only `n` was dumped
    changed = [*BIG[:-1], {"id": -1}]  # a new list (the engine copies on write)
    assert memo.dump("p", {"items": changed, "n": 3}, LARGE) == _plain({"items": changed, "n": 3})
    assert memo.reused == 1  # the new object's text was made, not the old one's reused
    # Another process holding the same object does not borrow `p`'s parts blindly:
    assert memo.dump("q", {"items": BIG}, LARGE) == _plain({"items": BIG})


def test_small_data_values_orjson_refuses_and_a_tight_budget_take_the_plain_path():
    memo = FragmentMemo(budget=1024)
    assert memo.dump("p", {"items": BIG}, LARGE - 1) == _plain({"items": BIG})
    assert memo.dumped == 0  # small last text: one plain dump
    huge = {"items": BIG, "n": 2**70}
    assert json.loads(memo.dump("p", huge, LARGE)) == huge  # past 64 bits: json.dumps
    assert memo.dump("p", {"items": BIG, "n": 1}, LARGE) == _plain({"items": BIG, "n": 1})
    assert len(memo) == 0  # 15 KB of parts never fit a 1 KB budget


def test_the_text_is_bound_as_it_is_not_copied():
    memo = FragmentMemo()
    memo.dump("p", {"items": BIG, "n": 1}, LARGE)
    text = memo.dump("p", {"items": BIG, "n": 2}, LARGE)
    assert type(text) is str and memo.dump("p", {}, LARGE) == "{}"
    wrapped = JsonText(text)
    assert dumps_json(wrapped) is text  # the JSON column's serializer answers the very text
    assert len(wrapped) == len(text)


def test_padding_rounds_large_text_up_to_a_block_and_keeps_a_length_that_still_fits():
    assert padded_length(LARGE - 1, 0) == LARGE - 1  # small text: as it is
    assert padded_length(LARGE - 1, 2 * LARGE) == LARGE - 1
    length = 71_066
    block = max(PAD_MIN, length // PAD_SHARE)
    new = padded_length(length, 0)
    assert new % block == 0 and length <= new < length + block
    assert padded_length(length - 5, new) == new  # a little shorter: the row's length
    assert padded_length(length + 5, new) == new  # a little longer, still fits
    assert padded_length(new + 1, new) > new  # no longer fits: the next block
    far = new - 2 * block  # two blocks to spare: rounded again, the row shrinks
    assert padded_length(far, new) == -(-far // max(PAD_MIN, far // PAD_SHARE)) * max(
        PAD_MIN, far // PAD_SHARE
    )
    assert padded_length(far, new) < new
    assert padded("{}", 0) == "{}"
    text = _plain({"items": BIG})
    assert padded(text, 0).rstrip(" ") == text and len(padded(text, 0)) == padded_length(
        len(text), 0
    )


def test_padded_dumps_keep_their_length_through_edits_of_a_few_characters():
    memo = FragmentMemo()
    plain = _plain({"items": BIG, "note": ""})
    first = memo.dump("p", {"items": BIG, "note": ""}, LARGE, pad=True)
    assert first.rstrip(" ") == plain and len(first) == padded_length(len(plain), LARGE)
    for note in ("x", "x" * 12, "", "é\u2028 ok"):
        data = {"items": BIG, "note": note}
        text = memo.dump("p", data, len(first), pad=True)
        assert len(text) == len(first)  # the stored row keeps its length
        assert text.rstrip(" ") == _plain(data) and json.loads(text) == data
    assert memo.reused >= 4  # the list's text was reused, the padding added to the join
    # The plain path (small previous text, values orjson refuses) pads the same way:
    huge = {"items": BIG, "n": 2**70}
    text = memo.dump("p", huge, len(first), pad=True)
    assert json.loads(text) == huge and len(text) == padded_length(len(text.rstrip()), len(first))
    assert memo.dump("q", {"items": BIG}, 0, pad=True) == padded(_plain({"items": BIG}), 0)
