"""The registry governance workflow: its actions, input shapes and the registry data."""

from __future__ import annotations

from typing import Any

import pytest

from stateward.domain import engine
from stateward.domain import events as ev
from stateward.domain.bootstrap import bootstrap_definition, governance_actions
from stateward.domain.canonical import canonical_hash
from stateward.domain.definition import validate_definition
from stateward.domain.errors import DomainError
from stateward.domain.model import Actor, Outcome, ProcessSnapshot
from stateward.domain.registry import validate_governance_input

TS = "2026-01-01T00:00:00.000Z"
ADMIN = Actor(id="op-key", roles=frozenset({"admin"}))
RETAIL = bootstrap_definition("customer/retail")
WORKFLOW = {
    "$version": "2.0",
    "$path": "customer/retail/onboard",
    "initial": "a",
    "states": {"a": {"label": "A"}},
    "actions": {},
}


def run(events: list[tuple[str, dict[str, Any]]], actor: Actor = ADMIN) -> Outcome:
    """Apply governance events in order to the retail registry (created by the first)."""
    process: ProcessSnapshot | None = None
    outcome: Outcome | None = None
    for n, (name, payload) in enumerate(events):
        event = engine.EngineEvent(name, actor, TS, f"e{n}", payload, "customer-retail-registry")
        outcome = engine.apply(process, event, RETAIL)
        process = ProcessSnapshot(
            "customer-retail-registry",
            "customer/retail/bootstrap",
            1,
            outcome.state,
            outcome.status,
            outcome.data,
        )
    assert outcome is not None
    return outcome


def code_of(call: Any) -> str:
    with pytest.raises(DomainError) as caught:
        call()
    return caught.value.code


def test_every_namespace_gets_the_governance_actions_and_system_also_the_key_actions() -> None:
    assert RETAIL.path == "customer/retail/bootstrap"
    assert tuple(RETAIL.actions) == governance_actions("customer/retail")
    system = bootstrap_definition("system")
    assert {"rotate_key", "revoke_key"} <= set(system.actions)
    assert "rotate_key" not in RETAIL.actions
    assert all(a.roles == ("admin",) for a in RETAIL.actions.values())


def test_users_may_not_deploy_a_bootstrap_path() -> None:
    report = validate_definition({**WORKFLOW, "$path": "customer/retail/bootstrap"})
    assert "RESERVED_PATH" in [p.code for p in report.errors]


def test_the_first_governance_event_creates_the_registry() -> None:
    out = run([("grant_role", {"actor": "bob", "roles": ["Analyst", "reviewer"]})])
    assert out.data["members"] == {"bob": ["analyst", "reviewer"]}
    assert [e.type for e in out.events] == [
        ev.WORKFLOW_STARTED,
        ev.WORKFLOW_UPDATED,
        ev.ROLE_GRANTED,
    ]


def test_add_then_update_makes_versions_with_the_canonical_hash() -> None:
    updated = {**WORKFLOW, "$description": "v2"}
    out = run(
        [
            ("add_workflow", {"definition": WORKFLOW}),
            ("update_workflow", {"definition": updated, "target": WORKFLOW["$path"]}),
        ]
    )
    assert out.data["workflows"] == {
        "customer/retail/onboard": {"version": 2, "hash": canonical_hash(updated)}
    }
    assert out.events[-1].details == {ev.D_PATH: "customer/retail/onboard"}


def test_add_of_an_existing_path_conflicts_and_update_of_a_missing_one_is_not_found() -> None:
    add = ("add_workflow", {"definition": WORKFLOW})
    assert code_of(lambda: run([add, add])) == "CONFLICT"
    assert code_of(lambda: run([("update_workflow", {"definition": WORKFLOW})])) == "NOT_FOUND"
    removed = run([add, ("remove_workflow", {"path": WORKFLOW["$path"]}), add])
    assert removed.data["workflows"][WORKFLOW["$path"]]["version"] == 2


def test_revoke_role_drops_roles_and_members_left_without_any() -> None:
    out = run(
        [
            ("grant_role", {"actor": "bob", "role": "a,b"}),
            ("revoke_role", {"actor": "bob", "roles": ["a"]}),
        ]
    )
    assert out.data["members"] == {"bob": ["b"]}
    gone = run(
        [
            ("grant_role", {"actor": "bob", "role": "a"}),
            ("revoke_role", {"actor": "bob", "role": "A"}),
        ]
    )
    assert gone.data["members"] == {}


def test_modules_and_webhooks_are_recorded() -> None:
    out = run(
        [
            ("add_module", {"name": "scoring", "source": "def f(ctx): return {}"}),
            ("update_module", {"name": "scoring", "source": "def f(ctx): return {1: 2}"}),
            ("set_webhook", {"url": "https://hooks.example/x", "secret": "s"}),
        ]
    )
    assert out.data["modules"]["scoring"]["version"] == 2
    assert out.data["webhook"] == {"url": "https://hooks.example/x", "signed": True}


def test_only_admins_govern() -> None:
    grant = ("grant_role", {"actor": "bob", "roles": ["admin"]})
    assert code_of(lambda: run([grant], Actor("bob"))) == "FORBIDDEN"


def test_rotate_key_moves_the_signers_grants_and_revoke_key_drops_a_key() -> None:
    system = bootstrap_definition("system")
    process = ProcessSnapshot(
        "system-registry",
        "system/bootstrap",
        1,
        "active",
        "active",
        {"state": "active", "members": {"old": ["admin"]}},
    )
    old = Actor("old", frozenset({"admin"}))
    rotated = engine.perform(system, process, "rotate_key", {"new_key": "new"}, old, TS, "e")
    assert rotated.data["members"] == {"new": ["admin"]}
    assert rotated.data["keys"] == {"rotated": {"old": "new"}}
    later = ProcessSnapshot(
        "system-registry", "system/bootstrap", 1, "active", "active", rotated.data
    )
    revoked = engine.perform(system, later, "revoke_key", {"key": "new"}, ADMIN, TS, "e2")
    assert revoked.data["members"] == {} and revoked.data["keys"]["revoked"] == ["new"]


@pytest.mark.parametrize(
    ("action", "payload", "pointer", "code"),
    [
        ("add_workflow", {}, "/definition", "INVALID_INPUT"),
        (
            "add_workflow",
            {"definition": {**WORKFLOW, "$path": "other/ns/x"}},
            "/definition/$path",
            "TARGET_MISMATCH",
        ),
        (
            "add_workflow",
            {"definition": WORKFLOW, "target": "customer/retail/y"},
            "/target",
            "TARGET_MISMATCH",
        ),
        ("remove_workflow", {"path": 3}, "/path", "INVALID_INPUT"),
        ("add_module", {"name": "Bad Name", "source": "x"}, "/name", "INVALID_INPUT"),
        ("add_module", {"name": "ok"}, "/source", "INVALID_INPUT"),
        ("grant_role", {"actor": "bob", "roles": []}, "/roles", "INVALID_INPUT"),
        ("grant_role", {"roles": ["a"]}, "/actor", "INVALID_INPUT"),
        ("set_webhook", {"url": "ftp://x"}, "/url", "INVALID_INPUT"),
        ("rotate_key", {}, "/new_key", "INVALID_INPUT"),
        ("revoke_key", {"key": ""}, "/key", "INVALID_INPUT"),
    ],
)
def test_malformed_governance_input_is_reported_with_a_pointer(
    action: str, payload: dict[str, Any], pointer: str, code: str
) -> None:
    problems = validate_governance_input(action, payload, namespace="customer/retail")
    assert [(p.pointer, p.code) for p in problems] == [(pointer, code)]


def test_the_engine_rejects_malformed_governance_input_with_its_problems() -> None:
    with pytest.raises(DomainError) as caught:
        run([("grant_role", {"actor": "bob"})])
    assert caught.value.code == "INVALID_INPUT"
    assert [p.pointer for p in caught.value.problems] == ["/roles"]
