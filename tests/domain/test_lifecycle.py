"""Cancel, hook automation (with its cycle guard), errors, staleness and `apply` dispatch."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from stateward.domain import engine
from stateward.domain import events as ev
from stateward.domain.definition import load_definition
from stateward.domain.errors import DomainError
from stateward.domain.model import Actor, ProcessSnapshot

TS = "2026-01-01T00:00:00.000Z"
ANA = Actor(id="ana", roles=frozenset({"analyst"}))
BOB = Actor(id="bob")
ADMIN = Actor(id="root", roles=frozenset({"admin"}))
SYSTEM = Actor(id="system")

FLOW = load_definition(
    {
        "$version": "2.0",
        "$path": "test/life/flow",
        "initial": "a",
        "states": {
            "a": {"label": "A", "assign": "team"},
            "auto": {"label": "Auto", "audience": "system", "hook": "mod:fn"},
            "hi": {"label": "Hi", "terminal": True},
            "lo": {"label": "Lo", "terminal": True},
        },
        "actions": {
            "submit": {"from": "a", "to": "auto"},
            "high": {"from": "auto", "to": "hi", "when": "score >= 50"},
            "low": {"from": "auto", "to": "lo", "when": "score < 50"},
            "loop": {"from": "auto", "to": "auto"},
        },
    }
)


def snap(state: str = "a", **kw: Any) -> ProcessSnapshot:
    fields: dict[str, Any] = {"status": "active", "started_by": "ana", **kw}
    return ProcessSnapshot(
        id="p", workflow="test/life/flow", version=1, state=state, data={"state": state}, **fields
    )


def event(op: str, actor: Actor = ANA, /, **payload: Any) -> engine.EngineEvent:
    return engine.EngineEvent(
        action=op, actor=actor, ts=TS, event_id="e", input=payload, process_id="p"
    )


def code_of(call: Any) -> str:
    with pytest.raises(DomainError) as caught:
        call()
    return caught.value.code


@pytest.mark.parametrize("actor", [ANA, ADMIN, SYSTEM])
def test_the_starter_an_admin_or_the_system_may_cancel(actor: Actor) -> None:
    out = engine.cancel(FLOW, snap(), actor, TS, reason="dup")
    assert out.status == "cancelled" and out.effects.cancel_assignments
    assert [e.type for e in out.events] == [ev.WORKFLOW_CANCELLED, ev.ASSIGNMENT_CANCELLED]
    assert out.events[0].details == {ev.D_REASON: "dup"}


def test_anyone_else_may_not_cancel() -> None:
    assert code_of(lambda: engine.cancel(FLOW, snap(), BOB, TS)) == "FORBIDDEN"


def test_a_finished_process_cannot_be_cancelled_but_an_errored_one_can() -> None:
    assert code_of(lambda: engine.cancel(FLOW, snap("hi", status="completed"), ADMIN, TS)) == (
        "INACTIVE_PROCESS"
    )
    assert engine.cancel(FLOW, snap("auto", status="error"), ADMIN, TS).status == "cancelled"


def test_automate_merges_the_hook_result_then_advances_as_the_system() -> None:
    out = engine.automate(FLOW, snap("auto"), {"score": 70, "state": "lo"}, ts=TS, event_id="e")
    assert (out.action, out.state, out.status) == ("high", "hi", "completed")
    assert out.data["score"] == 70 and out.data["state"] == "hi"


def test_a_hook_may_name_the_next_action() -> None:
    out = engine.automate(FLOW, snap("auto"), {"score": 7, "$action": "loop"}, ts=TS, event_id="e")
    assert (out.action, out.state) == ("loop", "auto") and "$action" not in out.data


def test_the_eleventh_consecutive_automated_event_puts_the_process_in_error() -> None:
    tenth = engine.automate(
        FLOW, snap("auto", automation_chain=9), {"$action": "loop"}, ts=TS, event_id="e"
    )
    assert tenth.status == "active" and tenth.effects.run_hook is None
    eleventh = engine.automate(FLOW, snap("auto", automation_chain=10), {}, ts=TS, event_id="e")
    assert eleventh.status == "error"
    assert [e.type for e in eleventh.events] == [ev.WORKFLOW_ERROR]
    assert "cycle guard" in eleventh.events[0].details[ev.D_REASON]


@pytest.mark.parametrize(
    "result", [["not", "an", "object"], {"$action": 3}, {"$action": "nope"}, {"$action": "low"}]
)
def test_a_hook_result_that_leads_nowhere_puts_the_process_in_error(result: Any) -> None:
    out = engine.automate(FLOW, snap("auto"), result, ts=TS, event_id="e")
    assert out.status == "error" and dict(out.data) == {"state": "auto"}
    assert out.events[0].details[ev.D_HOOK] == "mod:fn"


def test_a_failing_hook_is_recorded_as_an_error_outcome() -> None:
    out = engine.apply(snap("auto"), event("$automate", SYSTEM, hook="mod:fn", error="boom"), FLOW)
    assert out.status == "error" and out.events[0].details[ev.D_REASON] == "boom"


def test_apply_start_then_business_action_then_advance() -> None:
    begun = engine.apply(None, event("$start", data={"score": 1}), FLOW)
    process = replace(snap(), data=begun.data)
    assert engine.apply(process, event("submit"), FLOW).state == "auto"
    auto = snap("auto")
    assert code_of(lambda: engine.apply(auto, event("$advance"), FLOW)) == "FORBIDDEN"
    auto = replace(auto, data={"state": "auto", "score": 1})
    assert engine.apply(auto, event("$advance", SYSTEM), FLOW).state == "lo"


def test_apply_refuses_a_second_start_and_actions_on_a_missing_process() -> None:
    assert code_of(lambda: engine.apply(snap(), event("$start"), FLOW)) == "CONFLICT"
    assert code_of(lambda: engine.apply(None, event("submit"), FLOW)) == "NOT_FOUND"
    assert code_of(lambda: engine.apply(snap(), event("$nonsense"), FLOW)) == "NOT_FOUND"


def test_a_timer_performs_its_action_as_the_system() -> None:
    out = engine.apply(snap("auto"), event("$timer", SYSTEM, action="loop", key="k"), FLOW)
    assert (out.action, out.state) == ("loop", "auto")


def test_complete_performs_the_action_with_the_review_data_and_reports_it() -> None:
    payload = {"assignment": "as-1", "reviewData": {"ok": True}, "action": "submit"}
    out = engine.apply(snap(), event("$complete", **payload), FLOW)
    assert out.state == "auto"
    assert out.events[0].type == ev.ASSIGNMENT_COMPLETED
    assert out.events[0].details == {ev.D_ASSIGNMENT: "as-1"}


@pytest.mark.parametrize(
    ("name", "payload", "kind"),
    [
        ("$claim", {"assignment": "x"}, ev.WORKFLOW_CLAIMED),
        ("$unclaim", {"assignment": "x"}, ev.WORKFLOW_UNCLAIMED),
        ("$assignment_cancel", {"assignment": "x"}, ev.ASSIGNMENT_CANCELLED),
        ("$sla", {"kind": "warning"}, ev.SLA_WARNING),
        ("$sla", {"kind": "breach"}, ev.SLA_BREACHED),
    ],
)
def test_row_only_kernel_ops_change_no_data(name: str, payload: dict[str, Any], kind: str) -> None:
    process = snap()
    out = engine.apply(process, event(name, **payload), FLOW)
    assert (out.state, out.status, out.data) == (process.state, process.status, process.data)
    assert [e.type for e in out.events] == [kind]


def test_stale_marks_an_active_process_and_acting_reactivates_it() -> None:
    out = engine.apply(snap(), event("$stale", SYSTEM), FLOW)
    assert out.status == "stale" and out.events[0].type == ev.WORKFLOW_STALE
    again = engine.apply(snap(status="stale"), event("submit"), FLOW)
    assert again.status == "active"
