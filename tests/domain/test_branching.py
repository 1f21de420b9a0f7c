"""Branch rules (DESIGN §2.1): desugaring into generated actions, and the guards' semantics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stateward.domain.branching import loose_equal, resolve_target, rule_predicate
from stateward.domain.definition import load_definition, validate_definition
from stateward.domain.model import BranchRule, Definition

ROUTER_CASE = "branch rules: first match wins"


def router() -> dict[str, Any]:
    return {
        "$version": "2.0",
        "$path": "ops/routing/router",
        "initial": "intake",
        "states": {
            "intake": {
                "label": "Intake",
                "branch_rules": [
                    {"field": "priority", "op": "eq", "value": "urgent", "target": "EMERGENCY"},
                    {"field": "amount", "op": "gt", "value": 10000, "target": 2},
                ],
            },
            "standard": {"label": "Standard"},
            "emergency": {"label": "Emergency"},
            "done": {"label": "Done", "terminal": True},
        },
        "actions": {
            "close": {"from": ["standard", "emergency"], "to": "done"},
        },
    }


def advance(definition: Definition, state: str, data: dict[str, Any]) -> str | None:
    """What `advance` does for an actor with no roles: first applicable action from `state`."""
    for action in definition.actions.values():
        if action.from_states is not None and state not in action.from_states:
            continue
        if action.roles or (action.when_fn and not action.when_fn(data, {}, {"roles": []})):
            continue
        return action.to
    return None


def test_rules_become_guarded_actions_in_order_then_an_ordinal_fallback() -> None:
    definition = load_definition(router())
    generated = [a for a in definition.actions.values() if a.generated]
    assert [(a.key, a.from_states, a.to, a.roles) for a in generated] == [
        ("intake#1", ("intake",), "emergency", ()),
        ("intake#2", ("intake",), "emergency", ()),
        ("intake#3", ("intake",), "standard", ()),
    ]
    assert generated[2].when_fn is None
    assert list(definition.actions)[:3] == ["intake#1", "intake#2", "intake#3"]
    assert definition.states["intake"].branch_rules[0].target == "emergency"


def test_routing_picks_the_first_matching_rule_else_the_next_state() -> None:
    definition = load_definition(router())
    assert advance(definition, "intake", {"priority": "urgent", "amount": 1}) == "emergency"
    assert advance(definition, "intake", {"amount": "20000"}) == "emergency"
    assert advance(definition, "intake", {"amount": 5}) == "standard"
    assert advance(definition, "intake", {}) == "standard"


def test_a_star_rule_always_matches_and_suppresses_the_fallback() -> None:
    source = router()
    source["states"]["intake"]["branch_rules"].append({"field": "*", "target": "done"})
    definition = load_definition(source)
    assert [a.key for a in definition.actions.values() if a.generated] == [
        "intake#1",
        "intake#2",
        "intake#3",
    ]
    assert advance(definition, "intake", {}) == "done"


def test_the_last_state_and_terminal_states_get_no_fallback() -> None:
    source = router()
    source["states"]["done"]["branch_rules"] = [{"field": "x", "op": "exists", "target": 0}]
    report = validate_definition(source)
    assert report.valid
    assert [p.code for p in report.warnings] == ["TERMINAL_HAS_ACTIONS"]
    assert report.definition is not None
    assert not [a for a in report.definition.actions.values() if a.from_states == ("done",)]


def test_generated_actions_never_warn_as_shadowing() -> None:
    source = router()
    source["actions"]["manual"] = {"label": "Manual", "from": "intake", "to": "done"}
    assert validate_definition(source).warnings == ()


def test_the_engine_vector_routes_as_expected(conformance_dir: Path) -> None:
    engine = json.loads((conformance_dir / "engine.json").read_text(encoding="utf-8"))
    cases = [c for c in engine["cases"] if c["name"].startswith(ROUTER_CASE)]
    assert cases, "the branch-rule case of engine.json is gone"
    definition = load_definition(cases[0]["definition"])
    for case in cases[0]["cases"]:
        assert advance(definition, definition.initial, case["data"]) == case["expect_state"]


@pytest.mark.parametrize(
    ("op", "value", "data", "expected"),
    [
        ("eq", "urgent", {"f": "urgent"}, True),
        ("eq", 10, {"f": "10"}, True),
        ("eq", True, {"f": "true"}, True),
        ("eq", 1, {"f": True}, False),
        ("neq", "a", {"f": "b"}, True),
        ("neq", "a", {}, False),
        ("gt", 10, {"f": 11}, True),
        ("gt", 10, {"f": "9.5"}, False),
        ("gte", 10, {"f": 10}, True),
        ("lt", 10, {"f": "abc"}, False),
        ("lte", 0, {"f": -1}, True),
        ("in", ["a", "b"], {"f": "b"}, True),
        ("in", ["a", "b"], {"f": "c"}, False),
        ("contains", "urg", {"f": "very urgent"}, True),
        ("contains", "x", {"f": ["x", "y"]}, True),
        ("contains", "x", {"f": 5}, False),
        ("exists", None, {"f": 0}, True),
        ("exists", None, {"f": None}, False),
        ("exists", None, {}, False),
        ("not_exists", None, {}, True),
        ("not_exists", None, {"f": "x"}, False),
        ("eq", "x", {}, False),
    ],
)
def test_rule_operators(op: str, value: Any, data: dict[str, Any], expected: bool) -> None:
    guard = rule_predicate(BranchRule(field="f", op=op, value=value, target="t"))
    assert guard(data, {}, {}) is expected


def test_fields_read_nested_data_and_the_input() -> None:
    nested = rule_predicate(BranchRule(field="applicant.country", op="eq", value="DE", target="t"))
    assert nested({"applicant": {"country": "DE"}}, {}, {})
    from_input = rule_predicate(BranchRule(field="input.fields.n", op="gt", value=1, target="t"))
    assert from_input({}, {"fields": {"n": 2}}, {})


def test_targets_resolve_by_exact_name_then_case_insensitive_then_ordinal() -> None:
    keys = ["a", "Fast Track", "2"]
    assert resolve_target("fast track", keys) == "Fast Track"
    assert resolve_target("2", keys) == "2"
    assert resolve_target(0, keys) == "a"
    assert resolve_target(3, keys) is None
    assert resolve_target(True, keys) is None


def test_invalid_rules_report_their_own_pointers() -> None:
    source = router()
    source["states"]["intake"]["branch_rules"] = [
        {"field": "a", "op": "gt", "value": "many", "target": "done"},
        {"field": "a", "op": "in", "value": "x", "target": "done"},
        {"field": "a", "op": "eq", "target": "done", "extra": 1},
        {"field": "a", "op": "eq", "value": 1, "target": 9},
        "not a rule",
    ]
    found = {p.pointer: p.code for p in validate_definition(source).errors}
    assert found == {
        "/states/intake/branch_rules/0/value": "INVALID_BRANCH_RULE",
        "/states/intake/branch_rules/1/value": "INVALID_BRANCH_RULE",
        "/states/intake/branch_rules/2/extra": "INVALID_BRANCH_RULE",
        "/states/intake/branch_rules/2/value": "INVALID_BRANCH_RULE",
        "/states/intake/branch_rules/3/target": "UNKNOWN_STATE",
        "/states/intake/branch_rules/4": "INVALID_BRANCH_RULE",
    }


def test_loose_equality_never_equates_booleans_and_numbers() -> None:
    assert loose_equal(1, 1.0) and loose_equal("1.0", 1) and loose_equal([1], [1.0])
    assert not loose_equal(True, 1) and not loose_equal(None, "null")
