"""`FragmentMemo.dump` gives exactly the text of one `orjson.dumps` of the data, reusing
the text of a large top-level value only while the data holds that very object."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from stateward.persistence.db import dumps_json
from stateward.persistence.jsonparts import LARGE, FragmentMemo
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
