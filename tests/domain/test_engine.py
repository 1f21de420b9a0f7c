"""The engine's business paths: start, perform and advance (DESIGN §5), beyond the vectors."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateward.domain import engine
from stateward.domain import events as ev
from stateward.domain.definition import load_definition
from stateward.domain.errors import DomainError
from stateward.domain.model import Actor, Definition, ProcessSnapshot

TS = "2026-01-01T00:00:00.000Z"
ANA = Actor(id="ana", roles=frozenset({"analyst"}))
ADMIN = Actor(id="root", roles=frozenset({"admin"}))
SYSTEM = Actor(id="system")
VISITOR = Actor(id="visitor:0123456789abcdef", visitor=True)


def workflow(states: dict[str, Any], actions: dict[str, Any], initial: str = "a") -> Definition:
    return load_definition(
        {
            "$version": "2.0",
            "$path": "test/engine/flow",
            "initial": initial,
            "states": states,
            "actions": actions,
        }
    )


def process(
    definition: Definition, data: dict[str, Any] | None = None, **kw: Any
) -> ProcessSnapshot:
    begun = engine.start(
        definition,
        process_id="p1",
        data={"n": 0} if data is None else data,
        actor=ANA,
        ts=TS,
        event_id="e0",
    )
    fields: dict[str, Any] = {"status": begun.status, "started_by": "ana", **kw}
    return ProcessSnapshot(
        id="p1",
        workflow="test/engine/flow",
        version=1,
        state=begun.state,
        data=begun.data,
        **fields,
    )


REVIEW = workflow(
    {
        "a": {"label": "A"},
        "b": {"label": "B", "assign": "reviewers"},
        "c": {"label": "C", "terminal": True},
    },
    {
        "go": {"from": "a", "to": "b", "when": "n >= 0", "mutate": {"$increment": {"n": 1}}},
        "note": {"mutate": {"$append": {"notes": "input.text"}}},
        "done": {"role": "Manager", "from": "b", "to": "c"},
    },
)


def code_of(call: Any) -> str:
    with pytest.raises(DomainError) as caught:
        call()
    return caught.value.code


def test_start_puts_the_process_in_the_initial_state_and_emits_started() -> None:
    begun = engine.start(REVIEW, process_id="p", data={"x": 1}, actor=ANA, ts=TS, event_id="e")
    assert (begun.state, begun.status, dict(begun.data)) == ("a", "active", {"x": 1, "state": "a"})
    assert [e.type for e in begun.events] == [ev.WORKFLOW_STARTED]


def test_start_rejects_data_that_is_not_an_object() -> None:
    call = lambda: engine.start(REVIEW, process_id="p", data=[1], actor=ANA, ts=TS, event_id="e")  # type: ignore[arg-type]  # noqa: E731
    assert code_of(call) == "INVALID_INPUT"


def test_a_visitor_cannot_start_a_workflow_whose_initial_state_is_not_public() -> None:
    call = lambda: engine.start(REVIEW, process_id="p", data={}, actor=VISITOR, ts=TS, event_id="e")  # noqa: E731
    assert code_of(call) == "FORBIDDEN"


def test_perform_moves_the_state_and_reports_advanced() -> None:
    out = engine.perform(REVIEW, process(REVIEW, {"n": 0}), "go", {}, ANA, TS, "e1")
    assert (out.from_state, out.state, out.data["state"], out.data["n"]) == ("a", "b", "b", 1)
    assert out.events[0].type == ev.WORKFLOW_ADVANCED
    assert out.state_changed


def test_a_self_effect_keeps_the_state_and_reports_updated() -> None:
    out = engine.perform(REVIEW, process(REVIEW), "note", {"text": "hi"}, ANA, TS, "e1")
    assert out.state == "a" and out.data["notes"] == ["hi"]
    assert [e.type for e in out.events] == [ev.WORKFLOW_UPDATED]


def test_a_stale_process_may_act_and_becomes_active() -> None:
    out = engine.perform(REVIEW, process(REVIEW, status="stale"), "note", {}, ANA, TS, "e1")
    assert out.status == "active"


@pytest.mark.parametrize("status", ["completed", "cancelled", "error"])
def test_a_process_that_is_not_live_refuses_actions(status: str) -> None:
    snapshot = process(REVIEW, status=status)
    assert code_of(lambda: engine.perform(REVIEW, snapshot, "note", {}, ANA, TS, "e")) == (
        "INACTIVE_PROCESS"
    )


def test_an_active_process_in_a_terminal_state_refuses_actions() -> None:
    snapshot = ProcessSnapshot("p", "w", 1, "c", "active", {"state": "c"})
    assert code_of(lambda: engine.perform(REVIEW, snapshot, "note", {}, ANA, TS, "e")) == (
        "TERMINAL_STATE"
    )


def test_roles_are_matched_case_insensitively_even_when_the_actor_holds_upper_case() -> None:
    moved = engine.perform(REVIEW, process(REVIEW), "go", {}, ANA, TS, "e1")
    in_b = ProcessSnapshot("p", "w", 1, moved.state, "active", moved.data)
    manager = Actor(id="max", roles=frozenset({"MANAGER"}))
    assert engine.perform(REVIEW, in_b, "done", {}, manager, TS, "e2").status == "completed"
    assert code_of(lambda: engine.perform(REVIEW, in_b, "done", {}, ANA, TS, "e2")) == "FORBIDDEN"


def test_a_claimed_assignment_lets_only_its_assignee_or_an_admin_act() -> None:
    moved = engine.perform(REVIEW, process(REVIEW), "go", {}, ANA, TS, "e1")
    claimed = ProcessSnapshot("p", "w", 1, "b", "active", moved.data, claimed_by="bob")
    assert code_of(lambda: engine.perform(REVIEW, claimed, "note", {}, ANA, TS, "e2")) == (
        "FORBIDDEN"
    )
    assert engine.perform(REVIEW, claimed, "note", {}, Actor("bob"), TS, "e2").state == "b"
    assert engine.perform(REVIEW, claimed, "note", {}, ADMIN, TS, "e2").state == "b"


def test_the_system_actor_may_perform_role_restricted_actions() -> None:
    moved = engine.perform(REVIEW, process(REVIEW), "go", {}, ANA, TS, "e1")
    in_b = ProcessSnapshot("p", "w", 1, "b", "active", moved.data)
    assert engine.perform(REVIEW, in_b, "done", {}, SYSTEM, TS, "e2").state == "c"


def test_authorize_false_skips_roles_but_not_the_other_rules() -> None:
    moved = engine.perform(REVIEW, process(REVIEW), "go", {}, ANA, TS, "e1")
    in_b = ProcessSnapshot("p", "w", 1, "b", "active", moved.data)
    assert engine.perform(REVIEW, in_b, "done", {}, ANA, TS, "e2", authorize=False).state == "c"
    call = lambda: engine.perform(REVIEW, in_b, "go", {}, ANA, TS, "e2", authorize=False)  # noqa: E731
    assert code_of(call) == "WRONG_STATE"


PUBLIC = workflow(
    {"a": {"label": "A", "audience": "public"}, "b": {"label": "B"}},
    {
        "open": {"from": "a", "to": "b"},
        "staff": {"role": "agent", "from": "a", "to": "b"},
        "visitors": {"role": "public", "from": "a", "to": "b"},
    },
)


def test_visitors_act_only_on_open_or_public_actions_of_public_states() -> None:
    snapshot = process(PUBLIC)
    assert engine.perform(PUBLIC, snapshot, "open", {}, VISITOR, TS, "e").state == "b"
    assert engine.perform(PUBLIC, snapshot, "visitors", {}, VISITOR, TS, "e").state == "b"
    assert code_of(lambda: engine.perform(PUBLIC, snapshot, "staff", {}, VISITOR, TS, "e")) == (
        "FORBIDDEN"
    )


def test_advance_skips_actions_the_actor_may_not_take() -> None:
    out = engine.advance(PUBLIC, process(PUBLIC), {}, Actor("tom", frozenset({"agent"})), TS, "e")
    assert out.action == "open"
    assert engine.advance(PUBLIC, process(PUBLIC), {}, VISITOR, TS, "e").action == "open"


def test_advance_ignores_self_effects_and_actions_without_from() -> None:
    out = engine.advance(REVIEW, process(REVIEW), {}, ANA, TS, "e")
    assert out.action == "go"


def test_advance_with_a_hook_action_performs_that_action() -> None:
    out = engine.advance(PUBLIC, process(PUBLIC), {}, SYSTEM, TS, "e", hook_action="staff")
    assert out.action == "staff"


def test_advance_into_a_form_state_still_validates_the_form() -> None:
    formed = workflow(
        {
            "a": {"label": "A", "form": {"fields": {"name": {"type": "string", "required": True}}}},
            "b": {"label": "B", "terminal": True},
        },
        {"go": {"from": "a", "to": "b"}},
    )
    assert code_of(lambda: engine.advance(formed, process(formed), {}, ANA, TS, "e")) == (
        "INVALID_INPUT"
    )
    ok = engine.advance(formed, process(formed), {"fields": {"name": "x"}}, ANA, TS, "e")
    assert ok.status == "completed"


def test_a_branch_action_may_be_performed_by_its_generated_name() -> None:
    routed = workflow(
        {
            "a": {
                "label": "A",
                "branch_rules": [{"field": "k", "op": "eq", "value": 1, "target": "c"}],
            },
            "b": {"label": "B"},
            "c": {"label": "C", "terminal": True},
        },
        {"back": {"from": ["b"], "to": "a"}},
    )
    chosen = engine.advance(routed, process(routed, {"k": 1}), {}, ANA, TS, "e")
    assert chosen.action == "a#1" and chosen.state == "c"
    replayed = engine.perform(routed, process(routed, {"k": 1}), chosen.action, {}, ANA, TS, "e")
    assert replayed == chosen


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
DATA = st.dictionaries(st.sampled_from(["n", "notes", "x", "y"]), JSON, max_size=4)


@settings(max_examples=150, deadline=None)
@given(data=DATA, text=JSON, name=st.sampled_from(["go", "note", "done", "missing"]))
def test_perform_is_deterministic_and_never_mutates_its_inputs(
    data: dict[str, Any], text: Any, name: str
) -> None:
    snapshot = ProcessSnapshot("p", "w", 1, "a", "active", {**data, "state": "a"})
    payload = {"text": text}
    before = (copy.deepcopy(dict(snapshot.data)), copy.deepcopy(payload))
    results: list[Any] = []
    for _ in range(2):
        try:
            results.append(engine.perform(REVIEW, snapshot, name, payload, ANA, TS, "e"))
        except DomainError as exc:
            results.append((exc.code, exc.message))
    assert results[0] == results[1]
    assert (dict(snapshot.data), payload) == before
