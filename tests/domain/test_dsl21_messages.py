"""DSL 2.1 "messages that teach" and the graph warnings that know the new constructs
(issue 14). Each message is asserted by its text; each warning that must NOT be raised is
asserted absent next to a control that shows the same definition without the 2.1 construct
does raise it (so the absence is the construct's doing, not a blind linter).

The conformance vectors pin the codes; validation vectors can only say which warnings are
present, so the absences live here.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stateward.domain import engine
from stateward.domain.definition import load_definition, validate_definition
from stateward.domain.errors import DomainError
from stateward.domain.expressions import compile_expression
from stateward.domain.model import Actor, ProcessSnapshot

TS = "2026-01-01T00:00:00.000Z"
CLERK = Actor(id="clerk", roles=frozenset({"clerk"}))


def _process(raw: dict[str, Any], data: dict[str, Any] | None = None) -> tuple[Any, Any]:
    definition = load_definition(raw)
    begun = engine.start(
        definition, process_id="p-1", data=data or {}, actor=CLERK, ts=TS, event_id="e-0"
    )
    snapshot = ProcessSnapshot(
        id="p-1",
        workflow=raw["$path"],
        version=1,
        state=begun.state,
        status=begun.status,
        data=begun.data,
        started_by=CLERK.id,
    )
    return definition, snapshot


REVIEW: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/msg/review",
    "initial": "review",
    "states": {
        "review": {
            "label": "Review",
            "form": {"fields": {"comment": {"type": "string", "required": True}}},
        },
        "done": {"label": "Done", "terminal": True},
        "parked": {"label": "Parked", "terminal": True},
    },
    "actions": {
        "approve": {"role": "approver", "from": "review", "to": "done"},
        "park": {"role": "clerk", "from": "review", "to": "parked", "when": "input.park = TRUE"},
    },
}


# --- messages that teach ---------------------------------------------------------------


def test_form_values_sent_flat_say_to_send_them_under_fields() -> None:
    definition, process = _process(REVIEW)
    approver = Actor(id="ann", roles=frozenset({"approver"}))
    with pytest.raises(DomainError) as flat:
        engine.perform(definition, process, "approve", {"comment": "ok"}, approver, TS, "e-1")
    assert flat.value.code == "INVALID_INPUT" and flat.value.pointer == "/fields"
    assert flat.value.message == (
        "form values go under input.fields, not at the top of the input: "
        "send {\"fields\": {'comment': ...}}"
    )
    # The same mistake with nothing that looks like a form value: the ordinary message.
    with pytest.raises(DomainError) as empty:
        engine.perform(definition, process, "approve", {"other": 1}, approver, TS, "e-2")
    assert "under input.fields" not in empty.value.message
    assert "field 'comment' is required" in empty.value.message


def test_in_with_a_path_inside_the_list_says_how_to_write_it() -> None:
    with pytest.raises(DomainError) as bad:
        compile_expression("'b' IN (tags)")
    assert bad.value.code == "INVALID_EXPRESSION"
    assert "write `x IN tags`" in bad.value.message
    assert compile_expression("'b' IN tags")({"tags": ["a", "b"]}, {}, {}) is True


def test_no_applicable_action_says_when_the_cause_is_a_missing_role() -> None:
    definition, process = _process(REVIEW)
    fields = {"fields": {"comment": "fine"}}
    with pytest.raises(DomainError) as missing:
        engine.advance(definition, process, fields, CLERK, TS, "e-1")
    error = missing.value
    assert error.code == "NO_APPLICABLE_ACTION"
    assert error.message == (
        "no action out of state 'review' applies for this actor and input "
        "(you lack the role: 'approve' needs 'approver')"
    )
    assert error.details["missingRoles"] == {"approve": ["approver"]}
    # An actor holding every role whose guards fail is told nothing about roles.
    both = Actor(id="bo", roles=frozenset({"clerk"}))
    no_roles_needed = copy.deepcopy(REVIEW)
    no_roles_needed["actions"]["approve"]["when"] = "input.go = TRUE"
    definition, process = _process(no_roles_needed)
    with pytest.raises(DomainError) as guarded:
        engine.advance(definition, process, fields, both, TS, "e-2")
    assert "missingRoles" in guarded.value.details  # approve still needs 'approver'
    everyone = Actor(id="cy", roles=frozenset({"clerk", "approver"}))
    with pytest.raises(DomainError) as only_guards:
        engine.advance(definition, process, fields, everyone, TS, "e-3")
    assert only_guards.value.code == "NO_APPLICABLE_ACTION"
    assert "role" not in only_guards.value.message
    assert "missingRoles" not in only_guards.value.details


# --- graph warnings that know the 2.1 constructs -----------------------------------------


def _warnings(raw: dict[str, Any], **kw: Any) -> set[tuple[str, str]]:
    report = validate_definition(raw, **kw)
    assert report.valid, report.errors
    return {(p.code, p.pointer) for p in report.warnings}


def _shadowing() -> dict[str, Any]:
    """`go` (unguarded) comes first out of `draft`, so the guarded `expire` is shadowed
    for advance — unless something chooses `expire` by name."""
    return {
        "$version": "2.0",
        "$path": "ops/msg/flow",
        "initial": "draft",
        "states": {
            "draft": {"label": "Draft"},
            "wait": {"label": "Wait"},
            "done": {"label": "Done", "terminal": True},
        },
        "actions": {
            "go": {"from": "draft", "to": "wait"},
            "expire": {"from": "draft", "to": "done", "when": "late = TRUE"},
            "finish": {"from": "wait", "to": "done"},
        },
    }


SHADOWED = ("SHADOWED_ACTION", "/actions/expire")


def _by_timer(raw: dict[str, Any]) -> None:
    raw["actions"]["go"]["schedule"] = [{"action": "expire", "after": 60}]


def _by_state_timeout(raw: dict[str, Any]) -> None:
    raw["states"]["draft"]["timeout"] = {"seconds": 60, "action": "expire"}


def _by_referenced_timeout(raw: dict[str, Any]) -> None:
    raw["states"]["draft"]["timeout"] = {"seconds": {"$ref": "data.wait"}, "action": "expire"}


def _by_idle_timeout(raw: dict[str, Any]) -> None:
    raw["idle_timeout"] = {"seconds": 3600, "action": "expire"}


def _by_await(raw: dict[str, Any]) -> None:
    raw["states"]["draft"]["await"] = {"children": "all", "then": "expire"}


def _by_cancel(raw: dict[str, Any]) -> None:
    raw["actions"]["expire"]["to"] = "$cancel"


@pytest.mark.parametrize(
    "named",
    [_by_timer, _by_state_timeout, _by_referenced_timeout, _by_idle_timeout, _by_await,
     _by_cancel],
)  # fmt: skip
def test_actions_chosen_by_name_are_never_shadowed(named: Any) -> None:
    assert SHADOWED in _warnings(_shadowing())  # the control: advance never reaches it
    raw = _shadowing()
    named(raw)
    assert not any(code == "SHADOWED_ACTION" for code, _ in _warnings(raw))


def _island() -> dict[str, Any]:
    """`side` is entered by nothing the workflow does itself."""
    return {
        "$version": "2.0",
        "$path": "ops/msg/child",
        "initial": "open",
        "states": {
            "open": {"label": "Open"},
            "side": {"label": "Side"},
            "done": {"label": "Done", "terminal": True},
        },
        "actions": {
            "finish": {"from": "open", "to": "done"},
            "rush": {"from": "side", "to": "done"},
        },
    }


UNREACHABLE = ("UNREACHABLE_STATE", "/states/side")


def test_a_state_entered_through_a_spawns_to_is_not_unreachable() -> None:
    assert UNREACHABLE in _warnings(_island())  # the control
    own = _island()  # the workflow spawns itself into `side`
    own["actions"]["finish"]["spawn"] = [{"workflow": "ops/msg/child", "to": "side"}]
    assert UNREACHABLE not in _warnings(own)
    only = _island()  # a parent's spawn may name any state of a spawn-only workflow
    only["start"] = {"spawn_only": True}
    assert UNREACHABLE not in _warnings(only)
    # another workflow of the namespace spawns it into `side` (validate / validateWorkflow)
    assert UNREACHABLE not in _warnings(_island(), spawned_into=["side"])


def _join(then: dict[str, Any]) -> dict[str, Any]:
    return {
        "$version": "2.0",
        "$path": "ops/msg/join",
        "initial": "open",
        "states": {
            "open": {"label": "Open"},
            "wait": {"label": "Wait", "await": {"children": "all", "then": "joined"}},
            "done": {"label": "Done", "terminal": True},
        },
        "actions": {
            "fan": {"from": "open", "to": "wait",
                    "spawn": [{"workflow": "ops/msg/child", "each": {"$ref": "data.items"}}]},
            "joined": then,
        },
    }  # fmt: skip


def test_a_state_left_through_await_is_no_dead_end_and_its_target_is_reachable() -> None:
    control = _join({"role": "system", "from": "wait"})  # no await, a self-effect: stuck
    del control["states"]["wait"]["await"]
    control["actions"]["joined"]["from"] = "wait"
    assert ("DEAD_END_STATE", "/states/wait") in _warnings(control)
    assert ("UNREACHABLE_STATE", "/states/done") in _warnings(control)
    for then in (
        {"role": "system", "from": "wait", "to": "done"},
        {"role": "system", "to": "done"},
        {"role": "system", "from": "wait", "to": [{"when": "ok = TRUE", "to": "done"},
                                                  {"to": "$cancel"}]},
    ):  # fmt: skip
        found = _warnings(_join(then))
        assert not {c for c, _ in found} & {"DEAD_END_STATE", "UNREACHABLE_STATE"}, found
    # The join's `then` may end the instance some other way; the state is still left.
    assert not _warnings(_join({"role": "system", "from": "wait", "to": "$cancel"})) & {
        ("DEAD_END_STATE", "/states/wait")
    }
