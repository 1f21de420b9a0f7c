"""Registries and governance: deployments, versions, roles, modules — all signed events."""

from __future__ import annotations

import copy

import pytest
from runtime_definitions import ONBOARDING, REVIEW

from stateward.domain.errors import DomainError
from stateward.governance.keys import generate_keypair
from stateward.runtime.access import registry
from stateward.runtime.access.genesis import init


async def test_deploying_creates_the_namespace_registry_and_version_one(admin_rt, operator):
    result = await registry.deploy_workflow(admin_rt, operator, REVIEW)
    assert result.event.process_id == "case-review-registry"
    assert result.event.workflow == "case/review/bootstrap"
    assert result.event.seq == 1
    deployed = await registry.get_workflow(admin_rt, REVIEW["$path"])
    assert deployed is not None and deployed.version == 1
    assert deployed.hash == deployed.definition.hash
    assert [m.type for m in result.outbox] == ["workflow.deployed"]
    assert result.outbox[0].payload["workflow"] == REVIEW["$path"]
    assert "case/review" in await registry.list_namespaces(admin_rt)


async def test_update_makes_an_immutable_new_version(admin_rt, operator):
    await registry.deploy_workflow(admin_rt, operator, REVIEW)
    changed = copy.deepcopy(REVIEW)
    changed["$description"] = "v2"
    await registry.update_workflow(admin_rt, operator, changed)
    latest = await registry.get_workflow(admin_rt, REVIEW["$path"])
    first = await registry.get_workflow(admin_rt, REVIEW["$path"], 1)
    assert latest is not None and first is not None
    assert (latest.version, first.version) == (2, 1)
    assert latest.hash != first.hash


async def test_add_of_an_existing_path_and_update_of_a_missing_one_fail(admin_rt, operator):
    await registry.deploy_workflow(admin_rt, operator, REVIEW)
    with pytest.raises(DomainError):
        await registry.deploy_workflow(admin_rt, operator, REVIEW)
    other = dict(REVIEW, **{"$path": "case/review/other"})
    with pytest.raises(DomainError) as info:
        await registry.update_workflow(admin_rt, operator, other)
    assert info.value.code == "NOT_FOUND"


async def test_a_mismatched_target_is_refused(admin_rt, operator):
    with pytest.raises(DomainError) as info:
        await registry.deploy_workflow(admin_rt, operator, REVIEW, target="case/review/elsewhere")
    assert info.value.code == "INVALID_DEFINITION"
    assert "TARGET_MISMATCH" in {p.code for p in info.value.problems}


async def test_deploying_without_admin_is_forbidden(admin_rt):
    with pytest.raises(DomainError) as info:
        await registry.deploy_workflow(admin_rt, generate_keypair(), REVIEW)
    assert info.value.code == "FORBIDDEN"


async def test_granting_in_a_namespace_one_does_not_administer_is_forbidden(admin_rt, operator):
    retail_admin = generate_keypair()
    await registry.grant_role(admin_rt, operator, "customer/retail", retail_admin.public, ["admin"])
    member = generate_keypair().public
    await registry.grant_role(admin_rt, retail_admin, "customer/retail/vip", member, ["analyst"])
    assert await registry.roles_of(admin_rt, member, "customer/retail/vip") == {"analyst"}
    with pytest.raises(DomainError) as info:
        await registry.grant_role(admin_rt, retail_admin, "case", member, ["analyst"])
    assert info.value.code == "FORBIDDEN"


async def test_revoking_a_role_removes_the_grant(admin_rt, operator):
    member = generate_keypair().public
    await registry.grant_role(admin_rt, operator, "customer", member, ["analyst", "manager"])
    await registry.revoke_role(admin_rt, operator, "customer", member, ["manager"])
    assert await registry.roles_of(admin_rt, member, "customer/retail") == {"analyst"}


async def test_a_spawn_target_that_is_not_deployed_is_refused(admin_rt, operator):
    with pytest.raises(DomainError) as info:
        await registry.deploy_workflow(admin_rt, operator, ONBOARDING)
    assert info.value.code == "INVALID_DEFINITION"
    assert "UNRESOLVED_SPAWN" in {p.code for p in info.value.problems}


async def test_bootstrap_paths_are_never_stored_and_only_system_bootstrap_is_listed(
    admin_rt, operator
):
    bad = dict(REVIEW, **{"$path": "case/review/bootstrap"})
    with pytest.raises(DomainError) as info:
        await registry.deploy_workflow(admin_rt, operator, bad)
    assert "RESERVED_PATH" in {p.code for p in info.value.problems}
    await registry.deploy_workflow(admin_rt, operator, REVIEW)
    assert [w.path for w in await registry.list_workflows(admin_rt, "case/review")] == [
        REVIEW["$path"]
    ]
    assert "system/bootstrap" in [w.path for w in await registry.list_workflows(admin_rt)]


async def test_removed_workflows_disappear_but_keep_their_versions(admin_rt, operator):
    await registry.deploy_workflow(admin_rt, operator, REVIEW)
    await registry.remove_workflow(admin_rt, operator, REVIEW["$path"])
    assert await registry.get_workflow(admin_rt, REVIEW["$path"]) is None
    assert await registry.get_workflow(admin_rt, REVIEW["$path"], 1) is not None


async def test_modules_are_stored_with_their_hash_and_hooks_resolve_against_them(
    admin_rt, operator
):
    await registry.add_module(
        admin_rt, operator, "ops/auto", "scoring", "def score(ctx):\n    return {}\n"
    )
    hooked = {
        "$version": "2.0",
        "$path": "ops/auto/scored",
        "initial": "scoring",
        "states": {
            "scoring": {"label": "S", "audience": "system", "hook": "scoring:score"},
            "done": {"label": "D", "terminal": True},
        },
        "actions": {"finish": {"from": "scoring", "to": "done"}},
    }
    await registry.deploy_workflow(admin_rt, operator, hooked)
    missing = dict(hooked, **{"$path": "ops/auto/other"})
    missing["states"] = dict(
        hooked["states"], scoring={**hooked["states"]["scoring"], "hook": "nope:score"}
    )
    with pytest.raises(DomainError) as info:
        await registry.deploy_workflow(admin_rt, operator, missing)
    assert "UNRESOLVED_HOOK" in {p.code for p in info.value.problems}
    with pytest.raises(DomainError) as info:
        await registry.add_module(admin_rt, operator, "ops/auto", "broken", "def (:\n")
    assert info.value.code == "INVALID_INPUT"


async def test_init_twice_changes_nothing(runtime, operator):
    first = await init(runtime, operator.public)
    async with runtime.uow(readonly=True) as uow:
        events = await uow.events.count("system-registry")
    second = await init(runtime, generate_keypair().public)
    async with runtime.uow(readonly=True) as uow:
        assert await uow.events.count("system-registry") == events == 1
    assert first.created and not second.created
    assert first.admins == second.admins == (operator.public,)
    assert first.net == second.net


async def test_rotating_a_key_moves_its_grants(admin_rt, operator):
    member = generate_keypair()
    await registry.grant_role(admin_rt, operator, "customer", member.public, ["analyst"])
    new = generate_keypair()
    await registry.rotate_key(admin_rt, member, new.public)
    assert await registry.roles_of(admin_rt, new.public, "customer") == {"analyst"}
    assert await registry.roles_of(admin_rt, member.public, "customer") == frozenset()
    with pytest.raises(DomainError) as info:
        await registry.grant_role(admin_rt, member, "customer", new.public, ["x"])
    assert info.value.code == "BAD_SIGNATURE"
