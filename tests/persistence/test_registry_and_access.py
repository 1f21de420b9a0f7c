"""Workflows, versions, modules, grants, keys, tokens, challenges and meta round-trip."""

from __future__ import annotations

import json

from persistence_factories import T0, at

from stateward.persistence import UnitOfWorkFactory
from stateward.persistence.access import namespace_scopes
from stateward.records import WorkflowVersionRecord

DEF_V1 = json.dumps({"$path": "customer/retail/onboarding", "$version": "2.0"})
DEF_V2 = json.dumps({"$path": "customer/retail/onboarding", "$version": "2.0", "x": 1})


async def test_each_deploy_makes_a_new_immutable_version(uow_factory: UnitOfWorkFactory) -> None:
    path = "customer/retail/onboarding"
    async with uow_factory() as uow:
        v1 = await uow.workflows.add_version(path, DEF_V1, "h1", T0)
        v2 = await uow.workflows.add_version(path, DEF_V2, "h2", at(5))
        await uow.commit()
    assert (v1.version, v2.version) == (1, 2)
    async with uow_factory(readonly=True) as uow:
        workflow = await uow.workflows.get(path)
        assert workflow is not None
        assert (workflow.namespace, workflow.name, workflow.latest_version) == (
            "customer/retail",
            "onboarding",
            2,
        )
        assert workflow.created_at == T0 and workflow.updated_at == at(5)
        assert await uow.workflows.version(path) == v2
        assert await uow.workflows.version(path, 1) == v1
        assert await uow.workflows.versions(path) == [v1, v2]
        assert (await uow.workflows.version(path, 1)).source()["$version"] == "2.0"  # type: ignore[union-attr]
        keyed = await uow.workflows.versions_by_keys([(path, 1), (path, 2), (path, 9)])
        assert keyed == {(path, 1): v1, (path, 2): v2}
        assert await uow.workflows.latest_versions([path]) == {path: v2}
        assert [w.path for w in await uow.workflows.in_namespace("customer/retail")] == [path]
        assert await uow.workflows.namespaces() == ["customer/retail"]


async def test_a_removed_workflow_is_hidden_but_keeps_its_versions(
    uow_factory: UnitOfWorkFactory,
) -> None:
    path = "case/review/kyc"
    async with uow_factory() as uow:
        await uow.workflows.add_version(path, DEF_V1, "h1", T0)
        assert await uow.workflows.remove(path, at(1))
        assert not await uow.workflows.remove(path, at(2))
        await uow.commit()
    async with uow_factory() as uow:
        assert await uow.workflows.in_namespace("case/review") == []
        assert len(await uow.workflows.in_namespace("case/review", include_removed=True)) == 1
        assert isinstance(await uow.workflows.version(path, 1), WorkflowVersionRecord)
        again = await uow.workflows.add_version(path, DEF_V2, "h2", at(3))
        await uow.commit()
    assert again.version == 2
    async with uow_factory(readonly=True) as uow:
        workflow = await uow.workflows.get(path)
        assert workflow is not None and not workflow.removed


async def test_modules_are_versioned_per_name(uow_factory: UnitOfWorkFactory) -> None:
    async with uow_factory() as uow:
        a1 = await uow.modules.add_version("ns/x", "scoring", "def f(ctx): pass", "m1", T0)
        a2 = await uow.modules.add_version("ns/x", "scoring", "def g(ctx): pass", "m2", at(1))
        b1 = await uow.modules.add_version("ns/x", "alpha", "def h(ctx): pass", "m3", at(2))
        await uow.commit()
    assert (a1.version, a2.version, b1.version) == (1, 2, 1)
    async with uow_factory(readonly=True) as uow:
        assert await uow.modules.get("ns/x", "scoring") == a2
        assert await uow.modules.get("ns/x", "scoring", 1) == a1
        assert await uow.modules.latest_in("ns/x") == [b1, a2]
        assert await uow.modules.get("ns/x", "missing") is None


def test_grants_apply_from_system_and_every_namespace_prefix() -> None:
    assert namespace_scopes("customer/retail") == ["system", "customer", "customer/retail"]
    assert namespace_scopes("system") == ["system"]


async def test_roles_are_the_union_of_prefix_grants(uow_factory: UnitOfWorkFactory) -> None:
    async with uow_factory() as uow:
        assert await uow.grants.grant("system", "k1", "Admin", T0)
        assert not await uow.grants.grant("system", "k1", "admin", T0)
        await uow.grants.grant("customer", "k1", "analyst", T0)
        await uow.grants.grant("customer/retail", "k1", "manager", T0)
        await uow.grants.grant("case", "k1", "auditor", T0)
        await uow.commit()
    async with uow_factory() as uow:
        roles = await uow.grants.roles_of("k1", "customer/retail")
        assert roles == {"admin", "analyst", "manager"}
        assert await uow.grants.roles_of("k1", "customer/other") == {"admin", "analyst"}
        assert [g.role for g in await uow.grants.members("customer/retail")] == ["manager"]
        assert await uow.grants.revoke("customer", "k1", "ANALYST")
        assert not await uow.grants.revoke("customer", "k1", "analyst")
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        assert await uow.grants.roles_of("k1", "customer/retail") == {"admin", "manager"}


async def test_rotating_a_key_moves_its_grants(uow_factory: UnitOfWorkFactory) -> None:
    async with uow_factory() as uow:
        await uow.grants.grant("system", "old", "admin", T0)
        await uow.grants.grant("ns/a", "old", "analyst", T0)
        await uow.keys.rotate("old", "new", at(1))
        assert await uow.grants.move("old", "new", at(1)) == 2
        await uow.keys.revoke("stolen", at(2))
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        assert await uow.grants.of_actor("old") == []
        assert await uow.grants.roles_of("new", "ns/a") == {"admin", "analyst"}
        rotated = await uow.keys.status("old")
        assert rotated is not None and (rotated.status, rotated.rotated_to) == ("rotated", "new")
        revoked = await uow.keys.status("stolen")
        assert revoked is not None and revoked.revoked_at == at(2)
        assert await uow.keys.status("fresh") is None
        assert set(await uow.keys.statuses(["old", "stolen", "fresh"])) == {"old", "stolen"}


async def test_api_tokens_are_found_by_hash_and_can_be_revoked(
    uow_factory: UnitOfWorkFactory,
) -> None:
    async with uow_factory() as uow:
        token = await uow.tokens.add("f" * 64, "k1", T0, label="ci", expires_at=at(60))
        await uow.commit()
    async with uow_factory() as uow:
        loaded = await uow.tokens.get("f" * 64)
        assert loaded == token
        assert loaded.valid_at(at(59)) and not loaded.valid_at(at(60))
        assert await uow.tokens.revoke("f" * 64, at(1))
        assert not await uow.tokens.revoke("f" * 64, at(2))
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        revoked = await uow.tokens.get("f" * 64)
        assert revoked is not None and not revoked.valid_at(at(2))
        assert await uow.tokens.get("0" * 64) is None


async def test_a_login_challenge_is_single_use_and_expires(uow_factory: UnitOfWorkFactory) -> None:
    async with uow_factory() as uow:
        await uow.tokens.add_challenge("c1", "pk", at(120), T0)
        await uow.tokens.add_challenge("c2", "pk", at(120), T0)
        await uow.commit()
    async with uow_factory() as uow:
        assert not await uow.tokens.consume_challenge("c1", "other-key", at(1))
        assert await uow.tokens.consume_challenge("c1", "pk", at(1))
        assert not await uow.tokens.consume_challenge("c1", "pk", at(2))
        assert not await uow.tokens.consume_challenge("c2", "pk", at(120))
        assert await uow.tokens.purge_challenges(at(121)) == 2
        await uow.commit()


async def test_meta_keeps_the_first_deployment_id(uow_factory: UnitOfWorkFactory) -> None:
    async with uow_factory() as uow:
        assert await uow.meta.get("net") is None
        assert await uow.meta.get_or_create("net", "net-1") == "net-1"
        assert await uow.meta.get_or_create("net", "net-2") == "net-1"
        await uow.meta.set("schema_note", "a")
        await uow.meta.set("schema_note", "b")
        await uow.commit()
    async with uow_factory(readonly=True) as uow:
        assert (await uow.meta.get("net"), await uow.meta.get("schema_note")) == ("net-1", "b")


async def test_the_locked_read_carries_the_grants_generation_on_sqlite(
    uow_factory: UnitOfWorkFactory, driver_hops: list[str]
) -> None:
    """SQLite: a writer's locked read notes the grants generation, so reading it costs
    nothing more; it is the value a read of its own gives, and a transaction that raises
    the generation reads the raised value, not the note."""
    from persistence_factories import new_process

    from stateward.persistence.access import bump_generation, grant_generation

    pid = "00000000-0000-4000-8000-0000000000a1"
    async with uow_factory() as uow:
        await uow.processes.add(new_process(pid))
        await bump_generation(uow.session)
        await bump_generation(uow.session)
        await uow.commit()
    async with uow_factory() as uow:
        await uow.processes.lock([pid])
        sqlite = uow.dialect == "sqlite"
        driver_hops.clear()
        assert await grant_generation(uow.session) == 2
        assert driver_hops == [] or not sqlite  # noted by the locked read: no round trip
        await bump_generation(uow.session)
        assert await grant_generation(uow.session) == 3  # its own write: read again
    async with uow_factory() as uow:  # nothing committed: still 2, read or noted
        assert await grant_generation(uow.session) == 2
        await uow.processes.lock([pid])
        assert await grant_generation(uow.session) == 2
