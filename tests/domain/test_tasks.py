"""Task fields of a team `assign` object (issue 16): parsing with pointers, evaluation
against the data after the entering event, lenient on references that don't resolve."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stateward.domain.tasks import TaskSpec, parse_task, task_fields

ENTERED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_a_task_spec_parses_and_evaluates_numbers_and_references() -> None:
    raw = {"team": "analyst", "candidates": ["alice", "bob", "alice"],
           "priority": {"$ref": "data.level"}, "due": {"$ref": "data.deadline"},
           "followUp": 600}  # fmt: skip
    team, spec, problems = parse_task(raw, "/states/review/assign")
    assert (team, problems) == ("analyst", [])
    assert spec.candidates == ("alice", "bob")
    got = task_fields(spec, {"level": 7, "deadline": "2026-12-01T09:00:00+01:00"}, ENTERED)
    assert got.priority == 7 and got.candidates == ("alice", "bob")
    assert got.due_at == datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    assert got.follow_up_at == ENTERED + timedelta(seconds=600)
    relative = task_fields(spec, {"level": 1, "deadline": 60}, ENTERED)
    assert relative.due_at == ENTERED + timedelta(seconds=60)


def test_references_that_do_not_resolve_leave_the_field_empty() -> None:
    spec = TaskSpec(priority={"$ref": "data.level"}, due={"$ref": "data.when"})
    for data in ({}, {"level": "high", "when": "tomorrow"}, {"level": True, "when": "2026-12-01"}):
        got = task_fields(spec, data, ENTERED)
        assert (got.priority, got.due_at) == (None, None), data
    assert task_fields(None, {}, ENTERED).candidates == ()


def test_a_malformed_task_names_each_bad_field() -> None:
    raw = {"team": "", "candidates": [1], "priority": 1.5, "due": -5,
           "followUp": {"$ref": "input.x"}, "colour": "red"}  # fmt: skip
    _, _, problems = parse_task(raw, "/s/assign")
    assert {p.pointer for p in problems} == {
        f"/s/assign/{k}" for k in ("team", "candidates", "priority", "due", "followUp", "colour")
    }
    assert {p.code for p in problems} == {"INVALID_FIELD"}


def test_task_expressions_are_compiled_once_and_evaluated_purely() -> None:
    raw = {"team": "analyst", "priority": "CASE WHEN vip THEN 90 ELSE level * 10 END",
           "due": "deadline - 60", "followUp": "CASE WHEN x IS NULL THEN 600 END"}  # fmt: skip
    _, spec, problems = parse_task(raw, "/s/assign")
    assert problems == []
    data = {"level": 2.5, "deadline": "2026-12-01T09:00:00+01:00"}
    first, again = task_fields(spec, data, ENTERED), task_fields(spec, data, ENTERED)
    assert first == again and data == {"level": 2.5, "deadline": "2026-12-01T09:00:00+01:00"}
    assert first.priority == 25  # 2.5 * 10, an integer
    assert first.due_at == datetime(2026, 12, 1, 7, 59, tzinfo=UTC)
    assert first.due_at.tzinfo is UTC  # normalized: the offset of the data is not kept
    assert first.follow_up_at == ENTERED + timedelta(seconds=600)
    later = task_fields(spec, data, ENTERED + timedelta(hours=1))  # the clock is an argument
    assert later.follow_up_at == first.follow_up_at + timedelta(hours=1)


def test_task_expression_limits_and_messages() -> None:
    from stateward.domain.errors import DomainError
    from stateward.domain.value_expressions import compile_value

    for text, fragment in (
        ("(" * 65 + "1" + ")" * 65, "nests deeper than 64"),
        ("-" * 65 + "1", "nests deeper than 64"),
        ("1" + " + 1" * 1100, "longer than 4096 bytes"),
        ("end_date + end", "unexpected 'end'"),
        ("amount > 5", "CASE WHEN <condition>"),
        ("2026-12-01T00:00:00Z", "a timestamp is a 'string'"),
    ):
        try:
            compile_value(text)
        except DomainError as exc:
            assert exc.code == "INVALID_EXPRESSION" and fragment in exc.message, (text, exc)
            assert isinstance(exc.details["position"], int)
        else:  # pragma: no cover - the assertion below names the text
            raise AssertionError(f"{text[:40]!r} compiled")
    long_sum = compile_value(" + ".join(["1"] * 1000))  # a long flat chain, no recursion
    assert long_sum.evaluate({}) == 1000
    _, _, problems = parse_task({"team": "t", "priority": 5 * [1]}, "/a")
    assert [(p.code, p.pointer) for p in problems] == [("INVALID_FIELD", "/a/priority")]


def test_values_beyond_what_numbers_and_dates_hold_give_null_never_an_exception() -> None:
    raw = {"team": "t", "priority": "big * big * big * big * big * big + 0.5",
           "due": "big * big * big * big * big * big / 3", "followUp": "edge + 0"}  # fmt: skip
    _, spec, problems = parse_task(raw, "/a")
    assert problems == []
    huge = {"big": 2**53, "edge": "9999-12-31T23:00:00-05:00"}
    got = task_fields(spec, huge, ENTERED)
    assert (got.priority, got.due_at, got.follow_up_at) == (None, None, None)
    floats = task_fields(spec, {"big": 1e308, "edge": "0001-01-01T00:00:00+05:00"}, ENTERED)
    assert (floats.priority, floats.due_at, floats.follow_up_at) == (None, None, None)
