"""Compiled mutations behave exactly like `mutations.apply_mutation`, errors included."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stateward.domain.compiled import compile_mutation
from stateward.domain.errors import DomainError
from stateward.domain.mutations import apply_mutation

TS = "2026-01-01T00:00:00.000Z"
KEYS = st.sampled_from(["a", "b", "n"])
SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.sampled_from(["x", "input.v", "input.w.z", "$timestamp", "input."])
)
VALUE = SCALAR | st.lists(SCALAR, max_size=2) | st.dictionaries(KEYS, SCALAR, max_size=2)
MUTATE = st.fixed_dictionaries(
    {},
    optional={
        "$set": st.dictionaries(KEYS, VALUE, max_size=2),
        "$increment": st.dictionaries(KEYS, SCALAR, max_size=2),
        "$remove": KEYS | st.lists(KEYS, max_size=2),
        "$merge": st.dictionaries(KEYS, VALUE, max_size=1),
        "$append": st.dictionaries(KEYS, VALUE, max_size=1),
    },
)
DATA = st.dictionaries(KEYS, VALUE, max_size=3)
INPUT = st.fixed_dictionaries({}, optional={"v": VALUE, "w": st.dictionaries(st.just("z"), VALUE)})


def outcome(fn: Any) -> Any:
    try:
        return ("ok", fn())
    except DomainError as exc:
        return ("error", exc.code)


@settings(max_examples=400, deadline=None)
@given(mutate=MUTATE, data=DATA, input=INPUT)
def test_a_compiled_mutation_equals_the_reference(
    mutate: dict[str, Any], data: dict[str, Any], input: dict[str, Any]
) -> None:
    before = copy.deepcopy(data)
    compiled = compile_mutation(mutate)
    expected = outcome(lambda: apply_mutation(data, mutate, input, TS))
    got = outcome(lambda: compiled(data, input, TS))
    assert got == expected
    assert data == before


def test_no_data_operator_gives_a_fresh_copy() -> None:
    data = {"a": 1}
    copied = compile_mutation({"$schedule": [{"action": "x", "after": 1}]})(data, {}, TS)
    assert copied == data and copied is not data


def test_increment_of_a_boolean_fails_like_the_reference() -> None:
    compiled = compile_mutation({"$increment": {"n": 1}})
    assert outcome(lambda: compiled({"n": True}, {}, TS)) == ("error", "INVALID_INPUT")
