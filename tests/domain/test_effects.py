"""Effects of actions: spawns, timers, assignments, SLA deadlines, hooks and completion."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from stateward.domain import engine
from stateward.domain import events as ev
from stateward.domain.definition import load_definition
from stateward.domain.errors import DomainError
from stateward.domain.model import Actor, Definition, ProcessSnapshot

TS = "2026-01-01T00:00:00.000Z"
ANA = Actor(id="ana", roles=frozenset({"analyst"}))


def flow(states: dict[str, Any], actions: dict[str, Any]) -> Definition:
    return load_definition(
        {
            "$version": "2.0",
            "$path": "test/effects/flow",
            "initial": "a",
            "states": states,
            "actions": actions,
        },
        deployed=["case/review/kyc"],
    )


def at(state: str, data: dict[str, Any] | None = None) -> ProcessSnapshot:
    return ProcessSnapshot(
        "p", "test/effects/flow", 1, state, "active", {**(data or {}), "state": state}
    )


SPAWNING = flow(
    {"a": {"label": "A"}, "b": {"label": "B"}, "z": {"label": "Z", "terminal": True}},
    {
        "open": {
            "from": ["a", "b"],
            "to": "b",
            "spawn": [
                {
                    "workflow": "case/review/kyc",
                    "to": "open",
                    "as": "cases",
                    "data": {"who": "input.who", "fixed": 7},
                },
                {"workflow": "case/review/kyc", "from": "b", "as": "cases"},
            ],
        },
        "close": {"from": "b", "to": "z"},
    },
)


def test_spawned_children_get_ids_derived_from_the_event_and_the_item_index() -> None:
    out = engine.perform(SPAWNING, at("a"), "open", {"who": "bo"}, ANA, TS, "event-1")
    (child,) = out.effects.spawns
    assert child.child_id == str(uuid.uuid5(uuid.NAMESPACE_URL, "stateward:event-1:0"))
    assert (child.workflow, child.state, dict(child.data)) == (
        "case/review/kyc",
        "open",
        {"who": "bo", "fixed": 7},
    )
    again = engine.perform(SPAWNING, at("a"), "open", {"who": "bo"}, ANA, TS, "event-1")
    assert again.effects.spawns == out.effects.spawns


def test_a_spawn_item_with_from_fires_only_out_of_those_states_and_as_collects_ids() -> None:
    out = engine.perform(SPAWNING, at("b", {"cases": ["old"]}), "open", {}, ANA, TS, "e2")
    assert [s.state for s in out.effects.spawns] == ["open", None]
    assert out.data["cases"] == ["old", *[s.child_id for s in out.effects.spawns]]
    assert out.events[0].details[ev.D_CHILDREN] == [s.child_id for s in out.effects.spawns]


TIMED = flow(
    {
        "a": {"label": "A"},
        "b": {"label": "B", "sla_seconds": 100, "assign": "team-x"},
        "c": {"label": "C"},
        "z": {"label": "Z", "terminal": True},
    },
    {
        "go": {
            "from": "a",
            "to": "b",
            "schedule": [
                {"action": "late", "after": 90.5, "key": "k"},
                {"action": "late", "at": "input.when"},
            ],
        },
        "late": {"from": "b", "to": "c", "unschedule": [{"key": "k"}]},
        "finish": {"from": ["b", "c"], "to": "z"},
    },
)


def test_schedules_are_due_after_seconds_or_at_a_resolved_normalized_time() -> None:
    out = engine.perform(TIMED, at("a"), "go", {"when": "2026-02-01T10:00:00+02:00"}, ANA, TS, "e")
    due = [(s.action, s.due_at, s.key) for s in out.effects.schedules]
    assert due == [
        ("late", "2026-01-01T00:01:30.500Z", "k"),
        ("late", "2026-02-01T08:00:00.000Z", None),
    ]


@pytest.mark.parametrize("when", [None, "tomorrow", "2026-02-01T10:00:00"])
def test_a_schedule_at_that_is_not_an_rfc3339_time_is_invalid_input(when: Any) -> None:
    with pytest.raises(DomainError) as caught:
        engine.perform(TIMED, at("a"), "go", {"when": when}, ANA, TS, "e")
    assert caught.value.code == "INVALID_INPUT"


def test_entering_a_state_with_assign_and_sla_opens_an_assignment_and_sets_deadlines() -> None:
    out = engine.perform(TIMED, at("a"), "go", {"when": TS}, ANA, TS, "e")
    assert out.effects.open_assignment == "team-x"
    assert out.effects.sla is not None
    assert (out.effects.sla.warn_at, out.effects.sla.due_at) == (
        "2026-01-01T00:01:20.000Z",
        "2026-01-01T00:01:40.000Z",
    )
    assigned = [e for e in out.events if e.type == ev.WORKFLOW_ASSIGNED]
    assert [(e.team, e.to_state) for e in assigned] == [("team-x", "b")]


def test_leaving_the_state_cancels_assignments_clears_sla_and_drops_timers() -> None:
    out = engine.perform(TIMED, at("b"), "late", {}, Actor("system"), TS, "e")
    assert out.effects.cancel_assignments
    assert out.effects.sla is not None and out.effects.sla.due_at is None
    assert [(u.key, u.action) for u in out.effects.unschedules] == [("k", None)]
    assert ev.ASSIGNMENT_CANCELLED in [e.type for e in out.events]


def test_reaching_a_terminal_state_completes_the_process() -> None:
    out = engine.perform(TIMED, at("c"), "finish", {}, ANA, TS, "e")
    assert (out.status, out.effects.completed) == ("completed", True)
    assert [e.type for e in out.events] == [ev.WORKFLOW_ADVANCED, ev.WORKFLOW_COMPLETED]


def test_the_same_transition_twice_gives_equal_effects_from_the_cached_template() -> None:
    first = engine.perform(TIMED, at("c"), "finish", {}, ANA, TS, "e")
    second = engine.perform(TIMED, at("c"), "finish", {}, ANA, TS, "e")
    assert first == second


HOOKED = flow(
    {
        "a": {"label": "A"},
        "score": {"label": "Score", "audience": "system", "hook": "scoring:score"},
        "z": {"label": "Z", "terminal": True},
    },
    {"submit": {"from": "a", "to": "score"}, "route": {"from": "score", "to": "z"}},
)


def test_entering_a_system_state_with_a_hook_asks_the_runtime_to_run_it() -> None:
    out = engine.perform(HOOKED, at("a"), "submit", {}, ANA, TS, "e")
    assert out.effects.run_hook == "scoring:score"


def test_starting_in_a_state_with_assign_opens_its_assignment() -> None:
    starts_in_review = load_definition(
        {
            "$version": "2.0",
            "$path": "test/effects/start",
            "initial": "r",
            "states": {
                "r": {"label": "R", "assign": "team-y", "sla_seconds": 10},
                "z": {"label": "Z", "terminal": True},
            },
            "actions": {"ok": {"from": "r", "to": "z"}},
        }
    )
    begun = engine.start(starts_in_review, process_id="p", data={}, actor=ANA, ts=TS, event_id="e")
    assert begun.effects.open_assignment == "team-y"
    assert begun.effects.sla is not None and begun.effects.sla.due_at == "2026-01-01T00:00:10.000Z"
    assert [e.type for e in begun.events] == [ev.WORKFLOW_STARTED, ev.WORKFLOW_ASSIGNED]
