"""The pure check behind `Instance.availableActions`."""

from __future__ import annotations

from stateward.domain.available import available_actions
from stateward.domain.definition import load_definition
from stateward.domain.model import Actor, ProcessSnapshot

DEFINITION = load_definition({
    "$version": "2.0", "$path": "acme/t/flow", "initial": "a",
    "states": {"a": {"label": "A"}, "b": {"label": "B", "terminal": True},
               "s": {"label": "S", "audience": "system", "auto_transition": True}},
    "actions": {
        "go": {"label": "Go", "role": "clerk", "from": "a", "to": "b", "when": "n > 1"},
        "ask": {"label": "Ask", "from": "a", "to": "b", "when": "input.ok = TRUE"},
        "auto": {"label": "Auto", "from": "a", "to": "s"},
    },
})  # fmt: skip


def snapshot(state: str = "a", n: int = 2, status: str = "active", claimed: str | None = None):
    return ProcessSnapshot("p", "acme/t/flow", 1, state, status, {"n": n}, claimed_by=claimed)


def keys(found: list) -> list[str]:
    return [a.action.key for a in found]


def test_role_guard_and_input_dependent_guards_decide_what_is_listed() -> None:
    clerk = Actor("k", frozenset({"clerk"}))
    assert keys(available_actions(DEFINITION, snapshot(), clerk)) == ["go", "ask", "auto"]
    assert keys(available_actions(DEFINITION, snapshot(n=0), clerk)) == ["ask", "auto"]
    stranger = Actor("x")
    found = available_actions(DEFINITION, snapshot(), stranger)
    assert keys(found) == ["ask", "auto"] and found[0].guard_needs_input


def test_nothing_is_available_in_terminal_states_finished_processes_or_others_claims() -> None:
    clerk = Actor("k", frozenset({"clerk"}))
    assert available_actions(DEFINITION, snapshot(state="b"), clerk) == []
    assert available_actions(DEFINITION, snapshot(status="completed"), clerk) == []
    assert available_actions(DEFINITION, snapshot(claimed="someone"), clerk) == []
