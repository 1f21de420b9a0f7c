"""DSL 2.1 references: `{"$ref": "<path>"}` values, their scope, and the literal warning."""

from __future__ import annotations

from typing import Any

import pytest

from stateward.domain.compiled import compile_mutation
from stateward.domain.errors import INVALID_EXPRESSION, INVALID_MUTATION, DomainError
from stateward.domain.expressions import compile_expression
from stateward.domain.mutations import apply_mutation, resolve_value, validate_mutation
from stateward.domain.references import RefScope, parse_reference, scan_values

TS = "2026-01-01T00:00:00.000Z"
SCOPE = RefScope(
    data={"amount": 10, "order": {"lines": [1, 2]}},
    actor={"id": "ann", "roles": ["approver"]},
    parent={"budget": 500},
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("data.amount", 10),
        ("data.order.lines", [1, 2]),
        ("data.order.missing", None),
        ("data.amount.deeper", None),
        ("input.note", "hi"),
        ("actor.id", "ann"),
        ("actor.roles", ["approver"]),
        ("parent.budget", 500),
    ],
)
def test_a_reference_reads_its_root(path: str, expected: Any) -> None:
    assert resolve_value({"$ref": path}, {"note": "hi"}, TS, SCOPE) == expected


@pytest.mark.parametrize(
    "path", ["amount", "data", "actor.key", "actor.id.x", "input.", "data..a", "state.x", 7]
)
def test_a_malformed_reference_is_not_a_reference(path: object) -> None:
    assert parse_reference({"$ref": path}) is None


def test_without_a_scope_only_input_references_resolve() -> None:
    value = {"a": {"$ref": "data.amount"}, "b": {"$ref": "input.x"}, "c": {"$ref": "parent.p"}}
    assert resolve_value(value, {"x": 1}, TS) == {"a": None, "b": 1, "c": None}


def test_a_resolved_reference_never_aliases_the_data() -> None:
    got = resolve_value({"$ref": "data.order"}, {}, TS, SCOPE)
    got["lines"].append(3)
    assert SCOPE.data["order"] == {"lines": [1, 2]}


def test_references_nest_inside_objects_and_arrays() -> None:
    value = {"pair": [{"$ref": "actor.id"}, {"k": {"$ref": "data.amount"}}], "t": "$timestamp"}
    assert resolve_value(value, {}, TS, SCOPE) == {"pair": ["ann", {"k": 10}], "t": TS}


def test_data_references_read_the_data_before_the_mutation() -> None:
    mutate = {"$set": {"a": {"$ref": "data.b"}, "b": {"$ref": "data.a"}}}
    assert apply_mutation({"a": 1, "b": 2}, mutate, {}, TS) == {"a": 2, "b": 1}


def test_the_compiled_mutation_equals_the_reference_implementation() -> None:
    mutate = {
        "$set": {"who": {"$ref": "actor.id"}, "p": {"$ref": "parent.budget"}},
        "$increment": {"n": {"$ref": "data.amount"}},
    }
    data = {"amount": 10, "n": 1}
    scope = RefScope(data, SCOPE.actor, SCOPE.parent)
    fast = compile_mutation(mutate)(data, {}, TS, scope)
    assert fast == apply_mutation(data, mutate, {}, TS, scope)
    assert fast == {"amount": 10, "n": 11, "who": "ann", "p": 500}


def test_a_malformed_reference_is_an_invalid_mutation_with_its_pointer() -> None:
    problems = validate_mutation({"$set": {"a": {"$ref": "amount"}}}, "/m")
    assert [(p.code, p.pointer, p.severity) for p in problems] == [
        (INVALID_MUTATION, "/m/$set/a", "error")
    ]
    assert "data.<path>" in problems[0].message


@pytest.mark.parametrize("text", ["data.amount", "actor.id", "actor.roles", "parent.order.id"])
def test_a_literal_that_reads_like_a_path_warns(text: str) -> None:
    (problem,) = scan_values({"k": [text]}, "/v", INVALID_MUTATION)
    assert (problem.code, problem.pointer, problem.severity) == (
        "LITERAL_LOOKS_LIKE_PATH",
        "/v/k/0",
        "warning",
    )
    assert f'{{"$ref": "{text}"}}' in problem.message


@pytest.mark.parametrize("text", ["input.amount", "data", "amount", "actor.key", "Data.x", "a.b"])
def test_ordinary_literals_do_not_warn(text: str) -> None:
    assert scan_values(text, "/v", INVALID_MUTATION) == []


def test_in_with_a_path_inside_the_list_says_how_to_write_it() -> None:
    with pytest.raises(DomainError) as caught:
        compile_expression("'b' IN (tags, 'c')")
    assert caught.value.code == INVALID_EXPRESSION
    assert "write `x IN tags`" in caught.value.message
    assert "tags CONTAINS x" in caught.value.message


def test_membership_reports_the_paths_it_reads() -> None:
    from stateward.domain.expressions import expression_paths

    assert expression_paths("input.t IN done AND tags CONTAINS actor.id") == {
        "input.t",
        "done",
        "tags",
        "actor.id",
    }
