"""Form templates: parsing them (INVALID_FORM) and validating submitted fields (INVALID_INPUT)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateward.domain.errors import INVALID_FORM, INVALID_INPUT, DomainError
from stateward.domain.forms import (
    FIELD_TYPES,
    MAX_PATTERN_INPUT,
    check_fields,
    parse_form,
    unsafe_pattern_reason,
    validate_fields,
)
from stateward.domain.model import FormField, FormTemplate

AT = "/states/intake/form"


def form(**fields: dict[str, Any]) -> FormTemplate:
    template, problems = parse_form({"fields": fields}, AT)
    assert problems == [], problems
    assert template is not None
    return template


def form_problems(raw: object) -> list[tuple[str, str]]:
    template, problems = parse_form(raw, AT)
    assert template is None
    return [(p.code, p.pointer) for p in problems]


def field_problems(template: FormTemplate, fields: object) -> list[str]:
    problems = validate_fields(template, fields)
    assert all(p.code == INVALID_INPUT for p in problems)
    return [p.pointer for p in problems]


# --- parsing ----------------------------------------------------------------------------


def test_a_full_template_parses_into_ordered_typed_fields() -> None:
    template = form(
        name={"type": "string", "required": True, "max_length": 20, "pattern": "[A-Z].*"},
        income={"type": "number", "min": 0, "label": "Income", "help": "yearly"},
        kind={"type": "enum", "options": ["person", "company"]},
        born={"type": "date"},
    )
    assert [f.name for f in template.fields] == ["name", "income", "kind", "born"]
    assert template.field("name") == FormField(
        name="name", type="string", required=True, max_length=20, pattern="[A-Z].*"
    )
    assert template.field("kind") is not None
    assert template.field("kind").options == ("person", "company")  # type: ignore[union-attr]
    assert template.field("nope") is None


def test_every_field_type_is_accepted() -> None:
    for kind in FIELD_TYPES:
        spec: dict[str, Any] = {"type": kind}
        if kind == "enum":
            spec["options"] = ["a"]
        assert form(x=spec).fields[0].type == kind


def test_an_unknown_type_is_reported_at_the_type() -> None:
    assert form_problems({"fields": {"x": {"type": "blob"}}}) == [
        (INVALID_FORM, f"{AT}/fields/x/type")
    ]
    assert form_problems({"fields": {"x": {}}}) == [(INVALID_FORM, f"{AT}/fields/x/type")]


def test_bad_shapes_are_reported_where_they_are() -> None:
    assert form_problems([]) == [(INVALID_FORM, AT)]
    assert form_problems({}) == [(INVALID_FORM, f"{AT}/fields")]
    assert form_problems({"fields": []}) == [(INVALID_FORM, f"{AT}/fields")]
    assert form_problems({"fields": {"x": "string"}}) == [(INVALID_FORM, f"{AT}/fields/x")]
    assert form_problems({"fields": {}, "title": "x"}) == [(INVALID_FORM, f"{AT}/title")]
    assert form_problems({"fields": {"a.b": {"type": "string"}}}) == [
        (INVALID_FORM, f"{AT}/fields/a.b")
    ]


def test_unknown_and_inapplicable_properties_are_reported() -> None:
    assert form_problems({"fields": {"x": {"type": "string", "colour": "red"}}}) == [
        (INVALID_FORM, f"{AT}/fields/x/colour")
    ]
    assert form_problems({"fields": {"x": {"type": "string", "min": 1}}}) == [
        (INVALID_FORM, f"{AT}/fields/x/min")
    ]
    assert form_problems({"fields": {"x/y": {"type": "boolean", "options": [1]}}}) == [
        (INVALID_FORM, f"{AT}/fields/x~1y/options")
    ]


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"type": "string", "required": "yes"}, "required"),
        ({"type": "number", "min": "0"}, "min"),
        ({"type": "number", "max": True}, "max"),
        ({"type": "string", "min_length": -1}, "min_length"),
        ({"type": "string", "max_length": 2.5}, "max_length"),
        ({"type": "string", "max_length": float("inf")}, "max_length"),
        ({"type": "string", "pattern": "("}, "pattern"),
        ({"type": "string", "pattern": 5}, "pattern"),
        ({"type": "string", "pattern": "(a+)+$"}, "pattern"),
        ({"type": "string", "label": 1}, "label"),
        ({"type": "enum"}, "options"),
        ({"type": "enum", "options": []}, "options"),
        ({"type": "enum", "options": "a,b"}, "options"),
        ({"type": "enum", "options": ["a", {"b": 1}]}, "options/1"),
        ({"type": "enum", "options": ["a", "a"]}, "options/1"),
        ({"type": "number", "min": 5, "max": 1}, "max"),
        ({"type": "string", "min_length": 5, "max_length": 1}, "max_length"),
    ],
)
def test_wrong_property_values_are_reported_at_the_property(
    spec: dict[str, Any], where: str
) -> None:
    assert form_problems({"fields": {"x": spec}}) == [(INVALID_FORM, f"{AT}/fields/x/{where}")]


def test_catastrophic_patterns_are_refused_and_ordinary_ones_kept() -> None:
    for pattern in ["(a+)+$", "(a*)*b", r"^(\w+\s?)*$", "(x?y?)+z"]:
        assert unsafe_pattern_reason(pattern), pattern
    for pattern in [r"[A-Z]{2}[0-9]{2,4}", r"^[a-z]+(-[a-z]+)*$", r"(\d{3}-)?\d{4}", "(a|b)*c"]:
        assert unsafe_pattern_reason(pattern) is None, pattern


# --- validating fields ----------------------------------------------------------------------

APPLICANT = form(
    name={"type": "string", "required": True, "min_length": 2, "max_length": 5},
    income={"type": "number", "min": 0, "max": 100},
    count={"type": "integer"},
    ok={"type": "boolean"},
    kind={"type": "enum", "options": ["person", 1, True]},
    born={"type": "date"},
    at={"type": "datetime"},
    mail={"type": "email"},
    code={"type": "string", "pattern": "[A-Z]{2}[0-9]+"},
)


def test_valid_fields_pass() -> None:
    fields = {
        "name": "Ann",
        "income": 10.5,
        "count": 3.0,
        "ok": False,
        "kind": 1,
        "born": "2024-02-29",
        "at": "2026-01-01T09:30:00.123456789+01:00",
        "mail": "ann.o'neil+x@example.co.uk",
        "code": "AB12",
    }
    assert field_problems(APPLICANT, fields) == []


def test_required_means_present_non_null_and_non_empty() -> None:
    for fields in [{}, {"name": None}, {"name": ""}, None]:
        assert field_problems(APPLICANT, fields) == ["/fields/name"]


def test_optional_fields_may_be_null() -> None:
    assert field_problems(APPLICANT, {"name": "Ann", "income": None, "kind": None}) == []


def test_unknown_fields_are_rejected() -> None:
    assert field_problems(APPLICANT, {"name": "Ann", "extra": 1, "a/b": 2}) == [
        "/fields/extra",
        "/fields/a~1b",
    ]


def test_fields_must_be_an_object() -> None:
    assert field_problems(APPLICANT, ["name"]) == ["/fields"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("income", "10"),
        ("income", True),
        ("income", -1),
        ("income", 100.01),
        ("income", float("nan")),
        ("count", 1.5),
        ("count", False),
        ("ok", 0),
        ("ok", "true"),
        ("kind", "robot"),
        ("kind", "1"),
        ("kind", 1.5),
        ("born", "2023-02-29"),
        ("born", "2024-1-01"),
        ("born", "2024-01-01T00:00:00Z"),
        ("born", "２０２４-01-01"),
        ("at", "2026-01-01"),
        ("at", "2026-01-01T09:30:00"),
        ("at", "2026-13-01T09:30:00Z"),
        ("at", "2026-01-01T25:30:00Z"),
        ("at", "2026-01-01 09:30:00Z"),
        ("mail", "ann"),
        ("mail", "ann@localhost"),
        ("mail", "a b@example.com"),
        ("mail", "a@" + "x" * 250 + ".com"),
        ("code", "ab12"),
        ("code", "AB12 "),
        ("name", "A"),
        ("name", "Annabel"),
        ("name", 5),
    ],
)
def test_each_bad_value_is_reported_at_its_field(name: str, value: Any) -> None:
    fields = {"name": "Ann", name: value}
    assert field_problems(APPLICANT, fields) == [f"/fields/{name}"]


def test_every_bad_field_is_reported_not_just_the_first() -> None:
    assert field_problems(APPLICANT, {"income": -1, "ok": 1}) == [
        "/fields/name",
        "/fields/income",
        "/fields/ok",
    ]


def test_check_fields_raises_with_every_problem() -> None:
    with pytest.raises(DomainError) as caught:
        check_fields(APPLICANT, {"income": -1})
    assert caught.value.code == INVALID_INPUT
    assert [p.pointer for p in caught.value.problems] == ["/fields/name", "/fields/income"]
    check_fields(APPLICANT, {"name": "Ann"})


def test_huge_values_are_not_run_through_a_pattern() -> None:
    template = form(code={"type": "string", "pattern": "[a-z]*"})
    started = time.perf_counter()
    assert field_problems(template, {"code": "a" * (MAX_PATTERN_INPUT + 1)}) == ["/fields/code"]
    assert field_problems(template, {"code": "a" * MAX_PATTERN_INPUT}) == []
    assert time.perf_counter() - started < 1


@given(st.dictionaries(st.text(max_size=5), st.none() | st.booleans() | st.floats() | st.text()))
@settings(max_examples=300)
def test_any_fields_give_problems_never_exceptions(fields: dict[str, Any]) -> None:
    for problem in validate_fields(APPLICANT, fields):
        assert problem.code == INVALID_INPUT
        assert problem.pointer.startswith("/fields")


@given(st.dictionaries(st.text(max_size=8), st.none() | st.booleans() | st.integers() | st.text()))
@settings(max_examples=300)
def test_any_raw_field_spec_parses_or_reports_invalid_form(spec: dict[str, Any]) -> None:
    template, problems = parse_form({"fields": {"x": spec}}, AT)
    assert (template is None) == bool(problems)
    assert all(p.code == INVALID_FORM for p in problems)
