"""Definition validation (DESIGN §2): the conformance vectors, all-at-once reporting with
pointers, the typed Definition it builds, and canonical identity."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateward.domain.canonical import canonical_bytes, canonical_hash
from stateward.domain.definition import load_definition, validate_definition
from stateward.domain.errors import InvalidDefinition
from stateward.domain.versionhash import ordered_view


def example() -> dict[str, Any]:
    """The DESIGN §2 example (spawn target and hook module assumed deployed)."""
    return {
        "$version": "2.0",
        "$path": "customer/retail/retail-customer",
        "$description": "Retail customer onboarding",
        "initial": "intake",
        "states": {
            "intake": {
                "label": "Intake",
                "audience": "public",
                "form": {
                    "fields": {
                        "name": {"type": "string", "required": True},
                        "income": {"type": "number", "min": 0},
                    }
                },
            },
            "review": {"label": "Review", "assign": "analyst", "sla_seconds": 86400},
            "scoring": {"label": "Scoring", "audience": "system", "hook": "scoring:score"},
            "approved": {"label": "Approved", "terminal": True},
        },
        "actions": {
            "create": {
                "role": "admin,Analyst",
                "from": "intake",
                "to": "review",
                "mutate": {"$set": {"state": "review", "name": "input.fields.name"}},
            },
            "score": {"role": "analyst", "from": "review", "to": "scoring"},
            "approve": {
                "role": "manager",
                "from": ["review", "scoring"],
                "to": "approved",
                "when": "risk_score < 70",
                "mutate": {
                    "$set": {"approved_at": "$timestamp"},
                    "$spawn": [{"workflow": "case/review/kyc-review", "from": "scoring"}],
                },
                "spawn": [{"workflow": "case/review/kyc-review", "to": "open", "as": "kyc"}],
                "schedule": [{"action": "remind", "after": 3600, "key": "reminder"}],
            },
            "remind": {"role": "*", "label": "Remind", "unschedule": [{"key": "reminder"}]},
        },
    }


DEPLOYED = ["case/review/kyc-review"]


def codes(problems: Any) -> list[str]:
    return [p.code for p in problems]


def by_pointer(problems: Any) -> dict[str, str]:
    return {p.pointer: p.code for p in problems}


# --- the shared conformance vectors ---------------------------------------------------------


def test_validation_vector(validation_case: dict[str, Any]) -> None:
    case = validation_case
    source = case["text"] if "text" in case else json.dumps(case["definition"])
    report = validate_definition(
        source, deployed=case.get("deployed", []), target=case.get("target")
    )
    found = set(codes(report.errors))
    if case["errors"]:
        assert set(case["errors"]) <= found, report.errors
        assert not report.valid and report.definition is None
    else:
        assert report.errors == (), report.errors
        assert report.valid and report.definition is not None
    assert set(case.get("warnings", [])) <= set(codes(report.warnings))
    assert all(p.pointer == "" or p.pointer.startswith("/") for p in report.errors)


# --- reporting --------------------------------------------------------------------------------


def test_every_problem_is_reported_at_once_with_its_pointer() -> None:
    bad = example()
    bad["$version"] = 2.0
    bad["$category"] = "customer"
    bad["states"]["intake"]["audience"] = "everyone"
    bad["states"]["review"]["mode"] = "delegated"
    bad["actions"]["create"]["to"] = "nowhere"
    bad["actions"]["approve"]["when"] = "risk_score <"
    bad["actions"]["score"]["role"] = "admin,,x y"
    bad["actions"]["remind"]["mutate"] = {"$push": {"a": 1}}
    report = validate_definition(bad, deployed=DEPLOYED)
    assert by_pointer(report.errors) == {
        "/$version": "UNSUPPORTED_VERSION",
        "/$category": "FORBIDDEN_KEY",
        "/states/intake/audience": "INVALID_FIELD",
        "/states/review/mode": "INCONSISTENT_MODE",
        "/actions/create/to": "UNKNOWN_STATE",
        "/actions/create/mutate/$set/state": "STATE_MUTATION_MISMATCH",
        "/actions/approve/when": "INVALID_EXPRESSION",
        "/actions/score/role": "INVALID_ROLE",
        "/actions/remind/mutate/$push": "INVALID_MUTATION",
    }
    assert "position 12" in next(p.message for p in report.errors if p.code == "INVALID_EXPRESSION")


def test_duplicate_keys_anywhere_in_the_text_are_reported_at_each_duplicate() -> None:
    text = json.dumps(example()).replace(
        '"approved_at": "$timestamp"', '"approved_at": "$timestamp", "approved_at": 1'
    )
    text = text.replace('"label": "Review",', '"label": "Review", "label": "Again",')
    report = validate_definition(text, deployed=DEPLOYED)
    assert by_pointer(report.errors) == {
        "/actions/approve/mutate/$set/approved_at": "DUPLICATE_KEY",
        "/states/review/label": "DUPLICATE_KEY",
    }


def test_invalid_json_names_line_and_column() -> None:
    report = validate_definition('{\n  "$version": "2.0",\n  oops\n}')
    assert codes(report.errors) == ["INVALID_JSON"]
    assert "line 3 column 3" in report.errors[0].message


def test_nan_and_unsafe_integers_have_no_canonical_form() -> None:
    bad = example()
    bad["states"]["review"]["sla_seconds"] = float("nan")
    assert (
        by_pointer(validate_definition(bad, deployed=DEPLOYED).errors)["/states/review/sla_seconds"]
        == "INVALID_JSON"
    )
    report = validate_definition('{"$version": "2.0", "x": NaN}')
    assert codes(report.errors) == ["INVALID_JSON"]


def test_pointers_escape_slash_and_tilde_in_keys() -> None:
    bad = example()
    bad["states"]["a/b~c"] = {"label": "Odd", "terminal": "no"}
    report = validate_definition(bad, deployed=DEPLOYED)
    assert by_pointer(report.errors) == {"/states/a~1b~0c/terminal": "INVALID_FIELD"}


def test_unknown_fields_of_states_actions_and_workflow_are_invalid_fields() -> None:
    bad = example()
    bad["states"]["review"]["colour"] = "red"
    bad["actions"]["score"]["priority"] = 1
    bad["owner"] = "me"
    assert by_pointer(validate_definition(bad, deployed=DEPLOYED).errors) == {
        "/states/review/colour": "INVALID_FIELD",
        "/actions/score/priority": "INVALID_FIELD",
        "/owner": "INVALID_FIELD",
    }


def test_kernel_and_generated_action_names_are_reserved() -> None:
    bad = example()
    bad["actions"]["$start"] = {"from": "intake", "to": "review"}
    bad["actions"]["review#1"] = {"from": "review", "to": "approved"}
    found = by_pointer(validate_definition(bad, deployed=DEPLOYED).errors)
    assert found == {"/actions/$start": "FORBIDDEN_KEY", "/actions/review#1": "FORBIDDEN_KEY"}


def test_roles_star_alone_means_anyone_and_mixed_star_is_invalid() -> None:
    bad = example()
    bad["actions"]["remind"]["role"] = "*, admin"
    assert codes(validate_definition(bad, deployed=DEPLOYED).errors) == ["INVALID_ROLE"]
    bad["actions"]["remind"]["role"] = ["admin"]
    assert codes(validate_definition(bad, deployed=DEPLOYED).errors) == ["INVALID_FIELD"]


def test_mode_must_match_the_state_it_describes() -> None:
    bad = example()
    bad["states"]["review"]["mode"] = "review"  # has assign: fine
    bad["states"]["scoring"]["mode"] = "automated"  # system + hook: fine
    bad["states"]["intake"]["mode"] = "automated"  # public, no hook
    found = validate_definition(bad, deployed=DEPLOYED).errors
    assert codes(found) == ["INCONSISTENT_MODE", "INCONSISTENT_MODE"]
    assert {p.pointer for p in found} == {"/states/intake/mode"}


def test_schedule_items_need_a_known_action_and_one_of_after_or_at() -> None:
    bad = example()
    bad["actions"]["score"]["schedule"] = [
        {"action": "nope", "after": 5},
        {"action": "remind", "after": 5, "at": "2026-01-01T00:00:00Z"},
        {"action": "remind", "at": "tomorrow"},
        {"action": "remind", "at": "input.fields.when"},
    ]
    bad["actions"]["score"]["mutate"] = {"$unschedule": [{"key": "a", "action": "remind"}]}
    assert by_pointer(validate_definition(bad, deployed=DEPLOYED).errors) == {
        "/actions/score/schedule/0/action": "INVALID_FIELD",
        "/actions/score/schedule/1": "INVALID_FIELD",
        "/actions/score/schedule/2/at": "INVALID_FIELD",
        "/actions/score/mutate/$unschedule/0": "INVALID_MUTATION",
    }


# --- spawn, hooks, targets, bootstrap --------------------------------------------------------


def test_spawn_resolution_by_collection_predicate_own_path_or_shape_only() -> None:
    assert validate_definition(example(), deployed=lambda p: p in DEPLOYED).valid
    assert codes(validate_definition(example(), deployed=[]).errors) == ["UNRESOLVED_SPAWN"] * 2
    assert validate_definition(example()).valid  # deployed=None: shape only
    own = example()
    for spec in (own["actions"]["approve"]["spawn"], own["actions"]["approve"]["mutate"]["$spawn"]):
        spec[0]["workflow"] = own["$path"]
    assert validate_definition(own, deployed=[]).valid
    own["actions"]["approve"]["spawn"][0]["workflow"] = "../kyc-review"
    assert codes(validate_definition(own).errors) == ["UNRESOLVED_SPAWN"]


def test_hooks_resolve_in_the_workflow_namespace_when_modules_are_checked() -> None:
    asked: list[str] = []

    def modules(path: str) -> bool:
        asked.append(path)
        return path == "customer/retail/scoring"

    assert validate_definition(example(), deployed=DEPLOYED, modules=modules).valid
    assert asked == ["customer/retail/scoring"]
    other = example()
    other["states"]["scoring"]["hook"] = "risk/shared/scoring:score"
    found = validate_definition(other, deployed=DEPLOYED, modules=modules).errors
    assert by_pointer(found) == {"/states/scoring/hook": "UNRESOLVED_HOOK"}
    other["states"]["scoring"]["hook"] = "scoring.score"  # malformed: always checked
    assert codes(validate_definition(other, deployed=DEPLOYED).errors) == ["UNRESOLVED_HOOK"]


def test_bootstrap_may_omit_path_and_use_the_reserved_name() -> None:
    boot = example()
    del boot["$path"]
    assert codes(validate_definition(boot, deployed=DEPLOYED).errors) == ["MISSING_PATH"]
    definition = load_definition(boot, deployed=DEPLOYED, bootstrap=True)
    assert definition.path is None and definition.namespace == "system"
    boot["$path"] = "system/bootstrap"
    assert codes(validate_definition(boot, deployed=DEPLOYED).errors) == ["RESERVED_PATH"]
    assert validate_definition(boot, deployed=DEPLOYED, bootstrap=True).valid


def test_load_definition_raises_with_every_error() -> None:
    bad = example()
    del bad["initial"]
    bad["$path"] = "Customer/x"
    with pytest.raises(InvalidDefinition) as caught:
        load_definition(bad, deployed=DEPLOYED)
    assert caught.value.code == "INVALID_DEFINITION"
    assert codes(caught.value.problems) == ["INVALID_PATH", "MISSING_FIELD"]


# --- the built Definition ------------------------------------------------------------------


def test_states_keep_map_order_with_zero_based_ordinals() -> None:
    definition = load_definition(example(), deployed=DEPLOYED)
    assert [(s.key, s.ordinal) for s in definition.states.values()] == [
        ("intake", 0),
        ("review", 1),
        ("scoring", 2),
        ("approved", 3),
    ]
    review = definition.states["review"]
    assert (review.assign, review.sla_seconds, review.audience) == ("analyst", 86400.0, "team")
    assert definition.states["intake"].form is not None
    assert definition.states["scoring"].hook == "scoring:score"
    with pytest.raises(TypeError):
        definition.states["x"] = review  # type: ignore[index]


def test_actions_are_typed_with_roles_from_states_and_merged_effects() -> None:
    definition = load_definition(example(), deployed=DEPLOYED)
    create, approve, remind = (definition.actions[k] for k in ("create", "approve", "remind"))
    assert create.roles == ("admin", "analyst") and remind.roles == ()
    assert create.from_states == ("intake",) and remind.from_states is None
    assert approve.from_states == ("review", "scoring")
    assert approve.mutate == {"$set": {"approved_at": "$timestamp"}}
    assert [(s.workflow, s.to, s.as_key, s.from_states) for s in approve.spawn] == [
        ("case/review/kyc-review", "open", "kyc", None),
        ("case/review/kyc-review", None, None, ("scoring",)),
    ]
    assert [(s.action, s.after, s.key) for s in approve.schedule] == [
        ("remind", 3600.0, "reminder")
    ]
    assert [(u.key, u.action) for u in remind.unschedule] == [("reminder", None)]
    assert approve.when == "risk_score < 70" and approve.when_fn is not None
    assert approve.when_fn({"risk_score": 10}, {}, {}) is True
    assert approve.when_fn({"risk_score": 90}, {}, {}) is False
    assert not any(a.generated for a in definition.actions.values())


def test_source_is_a_copy_and_hash_is_sha256_of_the_ordered_view() -> None:
    source = example()
    definition = load_definition(source, deployed=DEPLOYED)
    source["states"]["intake"]["label"] = "changed"
    assert definition.source["states"]["intake"]["label"] == "Intake"
    assert definition.canonical == canonical_bytes(example())
    assert definition.hash == canonical_hash(ordered_view(example()))  # DESIGN §2.3


def test_hash_ignores_whitespace_and_key_order_of_the_text() -> None:
    text = json.dumps(example(), indent=4)
    reordered = example()
    reordered = {k: reordered[k] for k in reversed(list(reordered))}
    first = load_definition(text, deployed=DEPLOYED)
    second = load_definition(json.dumps(reordered), deployed=DEPLOYED)
    assert first.hash == second.hash
    assert list(first.states) == list(second.states)
    swapped = example()
    swapped["states"] = dict(reversed(list(swapped["states"].items())))
    assert load_definition(swapped, deployed=DEPLOYED).hash != first.hash  # order counts


# U+0000 is refused in every string (PostgreSQL cannot store it).
_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_labels = st.text(_chars, min_size=1, max_size=12).filter(lambda s: s.strip() != "")
_scalars = (
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(_chars, max_size=8)
)


@settings(max_examples=60, deadline=None)
@given(labels=st.lists(_labels, min_size=2, max_size=6, unique=True), extra=_scalars)
def test_canonical_form_is_idempotent(labels: list[str], extra: Any) -> None:
    """canonical(parse(canonical(d))) == canonical(d), through the definition loader."""
    source = copy.deepcopy(example())
    for index, label in enumerate(labels):
        source["states"][f"s{index}"] = {"label": label, "terminal": True}
    source["states"]["review"]["description"] = json.dumps(extra)
    definition = load_definition(source, deployed=DEPLOYED)
    again = load_definition(definition.canonical.decode("utf-8"), deployed=DEPLOYED)
    assert again.canonical == definition.canonical
    # the canonical text sorts states: the hash (which keeps order, DESIGN §2.3) differs
    # exactly when that changed the order
    same_order = ordered_view(again.source) == ordered_view(definition.source)
    assert (again.hash == definition.hash) == same_order
