"""Role resolution: the union of grants in `system` and every prefix of the namespace."""

from __future__ import annotations

from stateward.governance.roles import (
    Grant,
    has_role,
    namespace_scopes,
    registry_process_id,
    roles_for,
)

ALICE, BOB = "alice-key", "bob-key"

GRANTS = [
    Grant("system", ALICE, "Auditor"),
    Grant("customer", ALICE, "viewer"),
    Grant("customer/retail", ALICE, "clerk"),
    Grant("customer/retail/loans", ALICE, "approver"),
    Grant("customer/retailer", ALICE, "outsider"),
    Grant("partner", ALICE, "partner"),
    Grant("customer/retail", BOB, "admin"),
]


def test_scopes_are_system_then_every_prefix() -> None:
    assert namespace_scopes("a/b/c") == ("system", "a", "a/b", "a/b/c")
    assert namespace_scopes("system") == ("system",)


def test_roles_are_the_union_over_system_and_every_prefix() -> None:
    assert roles_for(ALICE, "customer/retail/loans", GRANTS) == {
        "auditor",
        "viewer",
        "clerk",
        "approver",
    }


def test_grants_in_deeper_or_sibling_namespaces_do_not_leak_upwards() -> None:
    assert roles_for(ALICE, "customer", GRANTS) == {"auditor", "viewer"}
    assert "outsider" not in roles_for(ALICE, "customer/retail", GRANTS)


def test_only_the_actors_own_grants_count() -> None:
    assert roles_for(BOB, "customer/retail/loans", GRANTS) == {"admin"}
    assert roles_for("nobody", "customer/retail", GRANTS) == frozenset()


def test_roles_are_lower_case_and_matched_case_insensitively() -> None:
    assert has_role(ALICE, "partner/x", "AUDITOR", GRANTS)
    assert not has_role(BOB, "customer", "admin", GRANTS)


def test_registry_process_ids_follow_the_namespace() -> None:
    assert registry_process_id("customer/retail") == "customer-retail-registry"
    assert registry_process_id("system") == "system-registry"
