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
