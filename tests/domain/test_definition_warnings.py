"""Authoring warnings (DESIGN §2.2): reported with pointers, never blocking."""

from __future__ import annotations

from typing import Any

from stateward.domain.definition import validate_definition


def flow(**actions: dict[str, Any]) -> dict[str, Any]:
    return {
        "$version": "2.0",
        "$path": "ops/lint/flow",
        "initial": "a",
        "states": {
            "a": {"label": "A"},
            "b": {"label": "B"},
            "c": {"label": "C", "terminal": True},
        },
        "actions": actions or {"go": {"from": "a", "to": "b"}, "end": {"from": "b", "to": "c"}},
    }


def warnings(source: dict[str, Any]) -> dict[str, str]:
    report = validate_definition(source)
    assert report.valid, report.errors
    return {p.pointer: p.code for p in report.warnings}


def test_a_clean_flow_has_no_warnings() -> None:
    assert warnings(flow()) == {}


def test_unreachable_and_dead_end_states_are_named() -> None:
    report = validate_definition(flow(go={"from": "a", "to": "c"}))
    assert sorted((p.code, p.pointer) for p in report.warnings) == [
        ("DEAD_END_STATE", "/states/b"),
        ("UNREACHABLE_STATE", "/states/b"),
    ]


def test_an_action_without_from_leaves_every_non_terminal_state() -> None:
    assert warnings(flow(go={"from": "a", "to": "b"}, cancel={"to": "c"})) == {}


def test_a_self_effect_is_no_way_out() -> None:
    found = warnings(
        flow(
            go={"from": "a", "to": "b"},
            note={"from": "b"},
            finish={"from": "a", "to": "c", "role": "boss"},
        )
    )
    assert found == {"/states/b": "DEAD_END_STATE"}


def test_actions_from_a_terminal_state_are_flagged() -> None:
    found = warnings(flow(go={"from": "a", "to": "b"}, end={"from": ["b", "c"], "to": "c"}))
    assert found == {"/actions/end/from": "TERMINAL_HAS_ACTIONS"}


def test_an_earlier_unguarded_action_for_the_same_actors_shadows_a_later_guarded_one() -> None:
    found = warnings(
        flow(
            go={"from": "a", "to": "b", "role": "clerk,boss"},
            guarded={"from": "a", "to": "c", "when": "x > 1"},
            later={"from": "a", "to": "c", "role": "boss", "when": "x > 2"},
            other={"from": "a", "to": "c", "role": "auditor", "when": "x > 3"},
            manual={"from": "a", "to": "c", "role": "boss"},
            end={"from": "b", "to": "c"},
        )
    )
    assert found == {"/actions/later": "SHADOWED_ACTION"}


def test_states_without_labels_are_flagged() -> None:
    source = flow()
    del source["states"]["b"]["label"]
    assert warnings(source) == {"/states/b": "MISSING_LABEL"}


def test_states_other_workflows_spawn_into_are_entries() -> None:
    from stateward.domain.lint import spawn_entries

    child = {
        "$version": "2.0",
        "$path": "ops/desk/child",
        "initial": "open",
        "states": {
            "open": {"label": "Open"},
            "fast": {"label": "Fast"},
            "done": {"label": "Done", "terminal": True},
        },
        "actions": {
            "finish": {"from": "open", "to": "done"},
            "rush": {"from": "fast", "to": "done"},
        },
    }
    unreachable = [p.pointer for p in validate_definition(child).warnings]
    assert unreachable == ["/states/fast"]

    def spawner(path: str, item: dict[str, Any], where: str = "spawn") -> dict[str, Any]:
        action: dict[str, Any] = {"from": "a", "to": "b"}
        if where == "spawn":
            action["spawn"] = [item]
        else:
            action["mutate"] = {"$spawn": item}
        return {"$path": path, "actions": {"go": action}}

    item = {"workflow": "ops/desk/child", "to": "fast"}
    assert spawn_entries([spawner("ops/desk/parent", item)], "ops/desk/child") == {"fast"}
    assert spawn_entries([spawner("ops/parent", item, "mutate")], "ops/desk/child") == {"fast"}
    # Another namespace's spawn starts the child at its initial state: not an entry.
    assert spawn_entries([spawner("fin/pay/parent", item)], "ops/desk/child") == set()
    assert (
        spawn_entries([spawner("ops/desk/parent", {**item, "to": None})], "ops/desk/child") == set()
    )
    entries = spawn_entries([spawner("ops/desk/parent", item)], "ops/desk/child")
    assert validate_definition(child, spawned_into=entries).warnings == ()
