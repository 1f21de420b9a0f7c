"""The version hash covers the order of `states` and `actions` (DESIGN §2.3)."""

from __future__ import annotations

import hashlib
import json

from stateward.domain.canonical import canonical_bytes, canonical_hash
from stateward.domain.definition import load_definition
from stateward.domain.versionhash import (
    apply_order,
    definition_order,
    deployed_hash,
    order_problems,
    ordered_hash,
    ordered_view,
)

FLOW = {
    "$version": "2.0",
    "$path": "acme/flow",
    "initial": "b",
    "states": {"b": {"label": "B"}, "a": {"label": "A", "terminal": True}},
    "actions": {"z": {"from": "b", "to": "a"}, "y": {"from": "b", "to": "a"}},
}
SWAPPED = {**FLOW, "states": {"a": FLOW["states"]["a"], "b": FLOW["states"]["b"]}}


def test_the_hash_is_sha256_of_the_jcs_of_the_ordered_view_written_out_by_hand():
    states = [["b", {"label": "B"}], ["a", {"label": "A", "terminal": True}]]
    actions = [["z", {"from": "b", "to": "a"}], ["y", {"from": "b", "to": "a"}]]
    view = {**FLOW, "states": states, "actions": actions}
    text = json.dumps(view, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert ordered_hash(FLOW) == hashlib.sha256(text.encode()).hexdigest()
    assert ordered_view(FLOW) == view


def test_reordering_states_changes_the_hash_and_the_legacy_hash_does_not_see_it():
    assert canonical_hash(FLOW) == canonical_hash(SWAPPED)
    assert ordered_hash(FLOW) != ordered_hash(SWAPPED)
    assert load_definition(FLOW).hash == ordered_hash(FLOW)
    assert load_definition(json.dumps(SWAPPED)).hash == ordered_hash(SWAPPED)


def test_an_order_rebuilds_the_authored_definition_from_its_sorted_form():
    order = definition_order(FLOW)
    assert order == {"states": ["b", "a"], "actions": ["z", "y"]}
    sorted_form = json.loads(canonical_bytes(FLOW))
    assert list(sorted_form["states"]) == ["a", "b"]
    rebuilt = apply_order(sorted_form, order)
    assert list(rebuilt["states"]) == ["b", "a"] and list(rebuilt["actions"]) == ["z", "y"]
    assert deployed_hash({"definition": sorted_form, "order": order}) == (ordered_hash(FLOW), 2)
    assert deployed_hash({"definition": FLOW}) == (canonical_hash(FLOW), 1)


def test_a_bad_order_is_refused_with_a_pointer():
    assert order_problems(FLOW, definition_order(FLOW)) == []
    bad = [
        ([], "/order"),
        ({"states": ["a"], "actions": ["z", "y"]}, "/order/states"),
        ({"states": ["a", "a"], "actions": ["z", "y"]}, "/order/states"),
        ({"states": ["a", "b"], "actions": ["z", 1]}, "/order/actions"),
        ({"states": ["a", "b"], "actions": ["z", "y"], "forms": []}, "/order/forms"),
    ]
    for order, pointer in bad:
        problems = order_problems(FLOW, order)
        assert [p.pointer for p in problems] == [pointer], order
        assert {p.code for p in problems} == {"INVALID_INPUT"}
