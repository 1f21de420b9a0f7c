"""The advance lifecycle of issue 13 in the pure engine, step by step and per stage type:
the submission merged, the on_advance and dynamic hand-overs, routing after the recorded
hook ($action, $next by key or ordinal, ordinal + 1, completion), auto_transition."""

from __future__ import annotations

from typing import Any

import pytest

from stateward.domain import engine
from stateward.domain import events as ev
from stateward.domain.definition import load_definition
from stateward.domain.errors import DomainError
from stateward.domain.model import Actor, Outcome, ProcessSnapshot

TS = "2026-01-01T00:00:00.000Z"
ANN = Actor(id="ann")
SYSTEM = Actor(id="system")
FLOW = load_definition(
    {
        "$version": "2.0",
        "$path": "test/stage/flow",
        "initial": "ask",
        "states": {
            "ask": {
                "label": "Ask",
                "type": "dynamic",
                "hook": "m:route",
                "stage_config": {"on_advance": "m:enrich"},
                "form": {"fields": {"topic": {"type": "string", "required": True}}},
                "branch_rules": [{"field": "topic", "op": "eq", "value": "x", "target": "end"}],
            },
            "one": {"label": "One"},
            "two": {"label": "Two"},
            "end": {"label": "End", "terminal": True},
        },
        "actions": {"jump": {"from": "ask", "to": "two"}},
    }
)


def _snap(state: str = "ask", data: dict[str, Any] | None = None) -> ProcessSnapshot:
    return ProcessSnapshot(
        id="p", workflow=FLOW.path or "", version=1, state=state, status="active",
        data={"state": state, **(data or {})},
    )  # fmt: skip


def _apply(process: ProcessSnapshot, action: str, input: dict[str, Any], actor: Actor) -> Outcome:
    event = engine.EngineEvent(action=action, actor=actor, ts=TS, event_id="e1", input=input)
    return engine.apply(process, event, FLOW)


def _automate(process: ProcessSnapshot, hook: str, result: Any) -> Outcome:
    return _apply(process, "$automate", {"hook": hook, "result": result}, SYSTEM)


def test_advance_validates_merges_then_hands_over_to_on_advance_first():
    out = _apply(_snap(), "$advance", {"fields": {"topic": "x"}}, ANN)
    assert (out.action, out.state, out.data["topic"]) == ("ask#advance", "ask", "x")
    assert out.effects.run_hook == "m:enrich"
    assert (
        out.events[0].type == ev.WORKFLOW_UPDATED and out.events[0].details["phase"] == "on_advance"
    )
    with pytest.raises(DomainError) as refused:
        _apply(_snap(), "$advance", {"fields": {}}, ANN)
    assert refused.value.code == "INVALID_INPUT"


def test_after_on_advance_the_rules_route_first():
    out = _automate(_snap(data={"topic": "x"}), "m:enrich", {"score": 3})
    assert (out.state, out.status, out.data["score"]) == ("end", "completed", 3)


def test_after_on_advance_a_dynamic_state_hands_over_to_its_routing_hook():
    out = _automate(_snap(data={"topic": "y"}), "m:enrich", {"score": 3})
    assert (out.action, out.state, out.effects.run_hook) == ("ask#hook", "ask", "m:route")


@pytest.mark.parametrize(
    ("result", "state"),
    [({"$next": "two"}, "two"), ({"$next": 1}, "one"), ({"$next": "2"}, "two"),
     ({"$action": "jump"}, "two"), ({}, "one")],
)  # fmt: skip
def test_the_routing_hook_routes_by_next_action_or_ordinal_plus_one(result, state):
    out = _automate(_snap(data={"topic": "y"}), "m:route", {**result, "note": "n"})
    assert (out.state, out.data["note"]) == (state, "n")
    assert "$next" not in out.data and "$action" not in out.data


@pytest.mark.parametrize("result", [{"$next": "nowhere"}, {"$action": "nope"}, [1]])
def test_a_routing_result_that_leads_nowhere_is_an_error(result):
    out = _automate(_snap(data={"topic": "y"}), "m:route", result)
    assert (out.state, out.status) == ("ask", "error")
    assert out.events[-1].type == ev.WORKFLOW_ERROR


def test_routing_past_the_last_state_completes():
    last = load_definition(
        {
            "$version": "2.0", "$path": "test/stage/last", "initial": "only",
            "states": {"only": {"label": "Only", "type": "dynamic", "hook": "m:r"}},
            "actions": {},
        }
    )  # fmt: skip
    event = engine.EngineEvent("$automate", SYSTEM, TS, "e", {"hook": "m:r", "result": {}})
    out = engine.apply(_snap("only"), event, last)
    assert (out.state, out.status) == ("only", "completed")


def test_declared_actions_stay_performable_by_name_without_a_hook():
    out = _apply(_snap(), "jump", {"fields": {"topic": "q"}}, ANN)
    assert (out.state, out.data["topic"], out.effects.run_hook) == ("two", "q", None)
