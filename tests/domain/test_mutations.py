"""Mutations: validation of `mutate`, each operator, their order, references, no aliasing."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateward.domain.errors import INVALID_INPUT, INVALID_MUTATION, DomainError
from stateward.domain.mutations import (
    apply_mutation,
    pointer_join,
    resolve_value,
    split_mutation,
    validate_mutation,
)

TS = "2026-01-01T00:00:00.000Z"


def apply(data: dict[str, Any], mutate: dict[str, Any], input: Any = None) -> dict[str, Any]:
    return apply_mutation(data, mutate, input or {}, TS)


def failure(data: dict[str, Any], mutate: dict[str, Any], input: Any = None) -> DomainError:
    with pytest.raises(DomainError) as caught:
        apply(data, mutate, input)
    return caught.value


def problems_at(mutate: object) -> list[tuple[str, str]]:
    return [(p.code, p.pointer) for p in validate_mutation(mutate, "/actions/x/mutate")]


# --- pointers -------------------------------------------------------------------------------


def test_pointer_join_escapes_tilde_and_slash() -> None:
    assert pointer_join("", "a/b", "c~d", 3) == "/a~1b/c~0d/3"
    assert pointer_join("/states") == "/states"
    assert pointer_join("/x", "") == "/x/"


# --- validation ---------------------------------------------------------------------------


def test_a_well_formed_mutation_has_no_problems() -> None:
    mutate = {
        "$set": {"state": "review", "name": "input.fields.name", "at": "$timestamp"},
        "$merge": {"meta": {"a": 1}, "more": "input.meta"},
        "$append": {"notes": "input.text"},
        "$increment": {"n": 1, "total": -2.5, "by": "input.fields.amount"},
        "$remove": ["scratch", "tmp"],
        "$spawn": [{"workflow": "a/b"}],
        "$schedule": [{"action": "x", "after": 5}],
        "$unschedule": [{"key": "k"}],
    }
    assert problems_at(mutate) == []
    assert problems_at({"$remove": "one"}) == []
    assert problems_at({}) == []


def test_an_unknown_operator_is_reported_at_its_pointer() -> None:
    assert problems_at({"$push": {"a": 1}}) == [(INVALID_MUTATION, "/actions/x/mutate/$push")]
    assert problems_at({"set": {"a": 1}}) == [(INVALID_MUTATION, "/actions/x/mutate/set")]


def test_increment_needs_numbers_and_a_boolean_is_not_one() -> None:
    assert problems_at({"$increment": {"n": "one", "m": True, "k": 2}}) == [
        (INVALID_MUTATION, "/actions/x/mutate/$increment/n"),
        (INVALID_MUTATION, "/actions/x/mutate/$increment/m"),
    ]
    assert problems_at({"$increment": {"n": float("inf")}}) != []


def test_merge_needs_objects() -> None:
    assert problems_at({"$merge": {"m": [1], "ok": {}}}) == [
        (INVALID_MUTATION, "/actions/x/mutate/$merge/m")
    ]


def test_operator_values_must_be_objects() -> None:
    for op in ("$set", "$merge", "$append", "$increment"):
        assert problems_at({op: ["a"]}) == [(INVALID_MUTATION, f"/actions/x/mutate/{op}")]
    assert problems_at("not an object") == [(INVALID_MUTATION, "/actions/x/mutate")]


def test_remove_takes_a_key_or_a_list_of_keys() -> None:
    assert problems_at({"$remove": 3}) == [(INVALID_MUTATION, "/actions/x/mutate/$remove")]
    assert problems_at({"$remove": ["a", 1]}) == [(INVALID_MUTATION, "/actions/x/mutate/$remove/1")]


def test_effect_operators_must_be_lists_or_objects() -> None:
    assert problems_at({"$spawn": "a/b"}) == [(INVALID_MUTATION, "/actions/x/mutate/$spawn")]


def test_split_moves_effect_operators_out_of_the_data_operators() -> None:
    data_ops, spawn, schedule, unschedule = split_mutation(
        {"$set": {"a": 1}, "$spawn": {"workflow": "a/b"}, "$unschedule": [{"key": "k"}]}
    )
    assert data_ops == {"$set": {"a": 1}}
    assert spawn == [{"workflow": "a/b"}]
    assert schedule == []
    assert unschedule == [{"key": "k"}]


# --- operators ----------------------------------------------------------------------------


def test_set_overwrites_top_level_keys_only() -> None:
    assert apply({"a": {"b": 1}}, {"$set": {"a": 2, "x.y": 3}}) == {"a": 2, "x.y": 3}


def test_merge_is_shallow_and_creates_the_object() -> None:
    out = apply(
        {"m": {"a": {"deep": 1}, "b": 1}}, {"$merge": {"m": {"a": {"new": 2}}, "n": {"x": 1}}}
    )
    assert out == {"m": {"a": {"new": 2}, "b": 1}, "n": {"x": 1}}


def test_merge_into_a_non_object_is_an_input_error() -> None:
    error = failure({"m": 5}, {"$merge": {"m": {"a": 1}}})
    assert error.code == INVALID_INPUT
    assert error.pointer == "/data/m"
    assert failure({}, {"$merge": {"m": "input.x"}}, {"x": 3}).code == INVALID_INPUT
    assert apply({"m": {"a": 1}}, {"$merge": {"m": "input.missing"}}) == {"m": {"a": 1}}


def test_append_creates_the_array_and_appends_one_item() -> None:
    out = apply({}, {"$append": {"log": "input.text"}}, {"text": "hi"})
    assert out == {"log": ["hi"]}
    assert apply(out, {"$append": {"log": ["a", "b"]}}) == {"log": ["hi", ["a", "b"]]}


def test_append_to_a_non_array_is_an_input_error() -> None:
    assert failure({"log": "text"}, {"$append": {"log": 1}}).code == INVALID_INPUT


def test_increment_treats_missing_as_zero_and_keeps_integers() -> None:
    out = apply({"n": 4}, {"$increment": {"n": 1, "fresh": 2, "f": 0.5}})
    assert out == {"n": 5, "fresh": 2, "f": 0.5}
    assert type(out["n"]) is int
    assert apply({"n": 1}, {"$increment": {"n": "input.by"}}, {"by": 2.5}) == {"n": 3.5}


def test_increment_of_a_non_number_is_an_input_error() -> None:
    assert failure({"n": "4"}, {"$increment": {"n": 1}}).code == INVALID_INPUT
    assert failure({"n": True}, {"$increment": {"n": 1}}).code == INVALID_INPUT
    assert failure({"n": 1}, {"$increment": {"n": "input.by"}}, {"by": "x"}).code == INVALID_INPUT
    assert failure({"n": 1}, {"$increment": {"n": "input.by"}}).code == INVALID_INPUT
    assert failure({"n": 1e308}, {"$increment": {"n": 1e308}}).code == INVALID_INPUT


def test_remove_takes_a_key_or_keys_and_ignores_missing_ones() -> None:
    assert apply({"a": 1, "b": 2, "c": 3}, {"$remove": ["a", "zz"]}) == {"b": 2, "c": 3}
    assert apply({"a": 1, "b": 2}, {"$remove": "b"}) == {"a": 1}


def test_operators_apply_in_the_contract_order_whatever_the_key_order() -> None:
    mutate = {
        "$remove": ["n"],
        "$increment": {"n": 1, "m": 1},
        "$append": {"m_log": "input.x"},
        "$merge": {"o": {"b": 2}},
        "$set": {"n": 10, "m": 1, "o": {"a": 1}},
    }
    assert apply({}, mutate, {"x": "y"}) == {"m": 2, "o": {"a": 1, "b": 2}, "m_log": ["y"]}


def test_the_engine_conformance_example_applies_as_specified() -> None:
    mutate = {
        "$set": {
            "owner": "input.fields.owner",
            "touched_at": "$timestamp",
            "missing": "input.fields.nope",
        },
        "$merge": {"meta": {"b": 2}},
        "$append": {"notes": "input.fields.text"},
        "$increment": {"edits": 1},
        "$remove": ["scratch"],
    }
    data = {"meta": {"a": 1}, "scratch": True, "edits": 4}
    out = apply(data, mutate, {"fields": {"owner": "ana", "text": "first"}})
    assert out == {
        "owner": "ana",
        "touched_at": TS,
        "missing": None,
        "meta": {"a": 1, "b": 2},
        "notes": ["first"],
        "edits": 5,
    }


def test_effect_operators_are_ignored_and_unknown_ones_refused_at_run_time() -> None:
    assert apply({"a": 1}, {"$spawn": [{"workflow": "a/b"}]}) == {"a": 1}
    assert failure({}, {"$push": {"a": 1}}).code == INVALID_MUTATION


# --- references -----------------------------------------------------------------------------


def test_references_resolve_from_input_or_timestamp_and_missing_is_null() -> None:
    input = {"fields": {"name": "Ann", "tags": ["x"]}, "top": 1}
    assert resolve_value("input.fields.name", input, TS) == "Ann"
    assert resolve_value("input.top", input, TS) == 1
    assert resolve_value("input.fields.nope.deeper", input, TS) is None
    assert resolve_value("input.top.x", input, TS) is None
    assert resolve_value("$timestamp", input, TS) == TS


def test_only_exact_references_resolve() -> None:
    for text in ["input", "input.", "input..x", " input.top", "Input.top", "$timestamp ", "x"]:
        assert resolve_value(text, {"top": 1}, TS) == text
    assert resolve_value(5, {}, TS) == 5


def test_references_resolve_inside_objects_and_arrays() -> None:
    value = {"who": "input.name", "when": ["$timestamp", "plain"]}
    assert resolve_value(value, {"name": "Bo"}, TS) == {"who": "Bo", "when": [TS, "plain"]}


def test_resolved_values_never_alias_the_definition_or_the_input() -> None:
    tags: list[str] = []
    mutate = {"$set": {"tags": tags, "copy": "input.obj"}}
    input = {"obj": {"k": [1]}}
    out = apply({}, mutate, input)
    out["tags"].append("x")
    out["copy"]["k"].append(2)
    assert tags == []
    assert input == {"obj": {"k": [1]}}


def test_a_value_nesting_past_the_recursion_limit_is_an_input_error() -> None:
    deep: Any = "leaf"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(DomainError) as caught:
        resolve_value(deep, {}, TS)
    assert caught.value.code == INVALID_INPUT


# --- properties -------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
KEYS = st.sampled_from(["a", "b", "c"])
MUTATE = st.fixed_dictionaries(
    {},
    optional={
        "$set": st.dictionaries(KEYS, JSON | st.just("input.v") | st.just("$timestamp")),
        "$merge": st.dictionaries(KEYS, st.dictionaries(KEYS, JSON)),
        "$append": st.dictionaries(KEYS, JSON),
        "$increment": st.dictionaries(KEYS, st.integers(-5, 5)),
        "$remove": st.lists(KEYS) | KEYS,
    },
)


@given(st.dictionaries(KEYS, JSON), MUTATE, st.dictionaries(st.just("v"), JSON))
@settings(max_examples=300)
def test_apply_never_modifies_its_arguments(
    data: dict[str, Any], mutate: dict[str, Any], input: dict[str, Any]
) -> None:
    before = copy.deepcopy((data, mutate, input))
    assert validate_mutation(mutate, "") == []
    try:
        out = apply_mutation(data, mutate, input, TS)
    except DomainError as exc:
        assert exc.code == INVALID_INPUT
    else:
        assert out is not data
    assert (data, mutate, input) == before
