"""Export, import (all-or-nothing) and clone: real runtimes, real signed events, both backends."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from stateward.domain.errors import DomainError, InvalidDefinition
from stateward.governance.keys import KeyPair, generate_keypair
from stateward.runtime.access import references, registry
from stateward.runtime.access.genesis import init
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.core.commands import attest, perform_action, start_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.verify import verify
from stateward.runtime.packages.batch import act_many
from stateward.runtime.packages.transfer import (
    FORMAT,
    clone_workflow,
    cloned_definition,
    export_package,
    import_package,
)
from stateward.settings import Settings

PRICING = 'def price(ctx):\n    return {"total": 42}\n'
INVOICE: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/billing/invoice",
    "initial": "open",
    "states": {"open": {"label": "Open"}, "paid": {"label": "Paid", "terminal": True}},
    "actions": {"pay": {"from": "open", "to": "paid"}},
}
# States deliberately out of alphabetical order: the order must survive the round trip.
ORDER: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/sales/order",
    "$description": "Sales order",
    "initial": "draft",
    "states": {
        "draft": {"label": "Draft"},
        "pricing": {"label": "Pricing", "audience": "system", "hook": "pricing:price"},
        "billed": {"label": "Billed", "terminal": True},
        "aborted": {"label": "Aborted", "terminal": True},
    },
    "actions": {
        "submit": {"from": "draft", "to": "pricing"},
        "bill": {
            "from": "pricing",
            "to": "billed",
            "spawn": [{"workflow": "acme/billing/invoice", "as": "invoices"}],
        },
        "abort": {"role": "admin", "to": "aborted"},
    },
}


def package(*workflows: dict[str, Any], modules: list[dict[str, Any]] | None = None) -> dict:
    return {"format": FORMAT, "workflows": list(workflows), "modules": modules or []}


def pricing_module() -> dict[str, Any]:
    return {"namespace": "acme/sales", "name": "pricing", "source": PRICING}


@pytest.fixture
async def other_rt(
    db_kind: str, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Runtime, KeyPair]]:
    """A second, initialized deployment on its own fresh database of the same kind."""
    url = request.getfixturevalue(f"{db_kind}_db_url")
    rt = await Runtime.open(
        Settings(database_url=url),
        clock=ManualClock(datetime.now(UTC)),
        node_key=generate_keypair(),
    )
    admin = generate_keypair()
    await init(rt, admin)
    yield rt, admin
    await rt.close()


async def deployed_paths(runtime: Runtime) -> list[str]:
    return [w.path for w in await registry.list_workflows(runtime) if w.namespace != "system"]


async def test_export_then_import_into_a_fresh_database_round_trips(admin_rt, operator, other_rt):
    await registry.add_module(admin_rt, operator, "acme/sales", "pricing", PRICING)
    await registry.deploy_workflow(admin_rt, operator, INVOICE)
    await references.allow_spawn(admin_rt, operator, "acme/billing", "acme/sales")
    await registry.deploy_workflow(admin_rt, operator, ORDER)
    exported = await export_package(admin_rt, operator.public, "acme")
    assert exported["format"] == FORMAT
    assert [w["$path"] for w in exported["workflows"]] == [INVOICE["$path"], ORDER["$path"]]
    assert list(exported["workflows"][1]["states"]) == ["draft", "pricing", "billed", "aborted"]
    assert [(m["namespace"], m["name"]) for m in exported["modules"]] == [("acme/sales", "pricing")]

    fresh, admin = other_rt
    text = json.dumps(exported)  # through JSON text, as the CLI and GraphQL carry it
    imported = await import_package(fresh, admin, text)
    assert [w.path for w in imported] == [INVOICE["$path"], ORDER["$path"]]
    for original in (INVOICE, ORDER):
        before = await registry.get_workflow(admin_rt, original["$path"])
        after = await registry.get_workflow(fresh, original["$path"])
        assert before is not None and after is not None
        assert after.hash == before.hash and after.version == 1
        assert list(after.definition.states) == list(original["states"])
        assert list(after.definition.source) == list(original)
    again = await export_package(fresh, admin.public, "acme")
    assert again == exported
    assert (await verify(fresh)).valid


async def test_a_package_with_one_broken_workflow_deploys_nothing(admin_rt, operator):
    broken = copy.deepcopy(ORDER)
    broken["states"]["draft"]["assign"] = 7
    with pytest.raises(InvalidDefinition) as info:
        await import_package(
            admin_rt, operator, package(INVOICE, broken, modules=[pricing_module()])
        )
    problems = {(p.code, p.pointer) for p in info.value.problems}
    assert ("INVALID_FIELD", "/workflows/1/states/draft/assign") in problems
    assert await deployed_paths(admin_rt) == []
    async with admin_rt.uow(readonly=True) as uow:
        assert await uow.modules.latest_in("acme/sales") == []


async def test_duplicate_paths_inside_a_package_are_refused(admin_rt, operator):
    with pytest.raises(InvalidDefinition) as info:
        await import_package(admin_rt, operator, package(INVOICE, INVOICE))
    assert [(p.code, p.pointer) for p in info.value.problems] == [
        ("DUPLICATE_PATH", "/workflows/1/$path")
    ]
    assert await deployed_paths(admin_rt) == []


async def test_package_shape_problems_point_into_the_package(admin_rt, operator):
    bad = {"format": "other/1", "workflows": {}, "extra": 1, "modules": [{"name": "x"}]}
    with pytest.raises(InvalidDefinition) as info:
        await import_package(admin_rt, operator, bad)
    problems = {(p.code, p.pointer) for p in info.value.problems}
    assert ("UNSUPPORTED_VERSION", "/format") in problems
    assert ("INVALID_FIELD", "/workflows") in problems
    assert ("INVALID_FIELD", "/extra") in problems
    assert ("INVALID_PATH", "/modules/0/namespace") in problems
    text = '{"format": "stateward.package/1", "workflows": [], "workflows": []}'
    with pytest.raises(InvalidDefinition) as dup:
        await import_package(admin_rt, operator, text)
    assert [p.code for p in dup.value.problems] == ["DUPLICATE_KEY"]


async def test_a_module_that_does_not_parse_blocks_the_import(admin_rt, operator):
    module = {"namespace": "acme/sales", "name": "pricing", "source": "def price(ctx:\n"}
    with pytest.raises(InvalidDefinition) as info:
        await import_package(admin_rt, operator, package(INVOICE, ORDER, modules=[module]))
    assert ("INVALID_MODULE", "/modules/0/source") in {
        (p.code, p.pointer) for p in info.value.problems
    }
    assert await deployed_paths(admin_rt) == []


async def test_a_hook_naming_a_module_that_is_nowhere_is_unresolved(admin_rt, operator):
    with pytest.raises(InvalidDefinition) as info:
        await import_package(admin_rt, operator, package(INVOICE, ORDER))
    assert ("UNRESOLVED_HOOK", "/workflows/1/states/pricing/hook") in {
        (p.code, p.pointer) for p in info.value.problems
    }


async def test_workflows_of_one_package_may_spawn_each_other_in_any_order(admin_rt, operator):
    ping = copy.deepcopy(INVOICE)
    ping["$path"] = "acme/loop/ping"
    ping["actions"]["pay"]["spawn"] = [{"workflow": "acme/loop/pong"}]
    pong = copy.deepcopy(INVOICE)
    pong["$path"] = "acme/loop/pong"
    pong["actions"]["pay"]["spawn"] = [{"workflow": "acme/loop/ping"}]
    imported = await import_package(admin_rt, operator, package(ping, pong))
    assert [w.path for w in imported] == ["acme/loop/ping", "acme/loop/pong"]
    assert (await verify(admin_rt)).valid


async def test_reimporting_the_same_package_changes_nothing_and_a_change_updates(
    admin_rt, operator
):
    pkg = package(INVOICE, ORDER, modules=[pricing_module()])
    await import_package(admin_rt, operator, pkg)
    await import_package(admin_rt, operator, pkg)
    invoice = await registry.get_workflow(admin_rt, INVOICE["$path"])
    assert invoice is not None and invoice.version == 1
    changed = copy.deepcopy(INVOICE)
    changed["$description"] = "second"
    result = await import_package(admin_rt, operator, package(changed))
    assert [(w.path, w.version) for w in result] == [(INVOICE["$path"], 2)]
    async with admin_rt.uow(readonly=True) as uow:
        module = await uow.modules.get("acme/sales", "pricing")
    assert module is not None and module.version == 1


async def test_importing_needs_admin_in_every_namespace_of_the_package(admin_rt, operator):
    stranger = generate_keypair()
    await registry.grant_role(admin_rt, operator, "acme/billing", stranger.public, ["admin"])
    with pytest.raises(DomainError) as info:
        await import_package(admin_rt, stranger, package(INVOICE, ORDER))
    assert info.value.code == "FORBIDDEN"
    assert await deployed_paths(admin_rt) == []


async def test_a_server_attested_import_is_signed_by_the_node_for_the_actor(admin_rt, operator):
    await import_package(admin_rt, operator.public, package(INVOICE))
    async with admin_rt.uow(readonly=True) as uow:
        events = await uow.events.for_process("acme-billing-registry")
    assert [(e.action, e.actor, e.signer) for e in events] == [
        ("add_workflow", operator.public, admin_rt.node_public)
    ]


async def test_one_failing_event_of_a_batch_rolls_back_the_others(admin_rt, operator):
    await registry.deploy_workflow(admin_rt, operator, INVOICE)
    module = attest(admin_rt, operator.public, "acme-sales-registry", "add_module",
                    "acme/sales/bootstrap", {"name": "pricing", "source": PRICING})  # fmt: skip
    again = attest(admin_rt, operator.public, "acme-billing-registry", "add_workflow",
                   "acme/billing/bootstrap", {"definition": INVOICE})  # fmt: skip
    with pytest.raises(DomainError) as info:
        await act_many(admin_rt, [module, again], attested=True)
    assert info.value.code == "CONFLICT" and info.value.details["index"] == 1
    async with admin_rt.uow(readonly=True) as uow:
        assert await uow.modules.get("acme/sales", "pricing") is None
        assert await uow.processes.get("acme-sales-registry") is None


async def test_export_needs_a_role_and_can_be_limited_to_paths(admin_rt, operator):
    await import_package(admin_rt, operator, package(INVOICE, ORDER, modules=[pricing_module()]))
    with pytest.raises(DomainError) as info:
        await export_package(admin_rt, generate_keypair().public, "acme")
    assert info.value.code == "NOT_FOUND"  # not readable: the answer of a missing namespace
    only = await export_package(admin_rt, operator.public, "acme", [INVOICE["$path"]])
    assert [w["$path"] for w in only["workflows"]] == [INVOICE["$path"]]
    assert only["modules"] == []
    sales = await export_package(admin_rt, "system", "acme/sales")
    assert [w["$path"] for w in sales["workflows"]] == [ORDER["$path"]]
    assert [m["name"] for m in sales["modules"]] == ["pricing"]
    with pytest.raises(DomainError) as missing:
        await export_package(admin_rt, operator.public, "acme/sales", [INVOICE["$path"]])
    assert (missing.value.code, missing.value.pointer) == ("NOT_FOUND", "/paths/0")


async def test_a_clone_is_a_new_workflow_whose_instances_run(admin_rt, operator):
    await registry.deploy_workflow(admin_rt, operator, INVOICE)
    clone = await clone_workflow(admin_rt, operator.public, INVOICE["$path"], "acme/billing/credit")
    assert (clone.path, clone.version) == ("acme/billing/credit", 1)
    assert list(clone.definition.states) == ["open", "paid"]
    started = await start_instance(admin_rt, operator.public, clone.path)
    done = await perform_action(admin_rt, operator.public, started.record.id, "pay")
    assert (done.record.state, done.record.status) == ("paid", "completed")
    async with admin_rt.uow(readonly=True) as uow:
        events = await uow.events.for_process("acme-billing-registry")
    assert events[-1].action == "add_workflow"
    assert events[-1].input["definition"]["$path"] == "acme/billing/credit"


async def test_a_clone_rewrites_self_spawns_and_qualifies_hooks_in_another_namespace():
    recursive = copy.deepcopy(ORDER)
    recursive["actions"]["bill"]["spawn"].append({"workflow": ORDER["$path"]})
    copied = cloned_definition(recursive, ORDER["$path"], "other/place/order")
    assert copied["$path"] == "other/place/order"
    assert [s["workflow"] for s in copied["actions"]["bill"]["spawn"]] == [
        "acme/billing/invoice",
        "other/place/order",
    ]
    assert copied["states"]["pricing"]["hook"] == "acme/sales/pricing:price"
    assert list(copied) == list(recursive)


async def test_cloning_onto_an_existing_or_malformed_target_is_refused(admin_rt, operator):
    await registry.deploy_workflow(admin_rt, operator, INVOICE)
    with pytest.raises(DomainError) as exists:
        await clone_workflow(admin_rt, operator, INVOICE["$path"], INVOICE["$path"])
    assert exists.value.code == "CONFLICT"
    with pytest.raises(InvalidDefinition) as bad:
        await clone_workflow(admin_rt, operator, INVOICE["$path"], "Acme/Bad Path")
    assert {p.pointer for p in bad.value.problems} == {"/target"}
    with pytest.raises(DomainError) as missing:
        await clone_workflow(admin_rt, operator, "acme/billing/nothing", "acme/billing/x")
    assert missing.value.code == "NOT_FOUND"


async def _sales_spawning_billing(rt: Runtime, operator: KeyPair) -> None:
    await registry.add_module(rt, operator, "acme/sales", "pricing", PRICING)
    await registry.deploy_workflow(rt, operator, INVOICE)
    await references.allow_spawn(rt, operator, "acme/billing", "acme/sales")
    await registry.deploy_workflow(rt, operator, ORDER)


async def test_without_dependencies_the_package_names_them_and_import_says_so(
    admin_rt, operator, other_rt
):
    await _sales_spawning_billing(admin_rt, operator)
    exported = await export_package(admin_rt, operator.public, "acme/sales")
    assert [w["$path"] for w in exported["workflows"]] == [ORDER["$path"]]
    assert exported["dependencies"] == [{"kind": "workflow", "path": INVOICE["$path"]}]
    fresh, admin = other_rt
    with pytest.raises(InvalidDefinition) as err:
        await import_package(fresh, admin, json.dumps(exported))
    first = err.value.problems[0]
    assert (first.code, first.pointer) == ("UNRESOLVED_SPAWN", "/dependencies/0")
    assert INVOICE["$path"] in first.message and "--with-dependencies" in first.message
    assert await deployed_paths(fresh) == []


async def test_with_dependencies_a_package_imports_into_a_fresh_deployment(
    admin_rt, operator, other_rt
):
    await _sales_spawning_billing(admin_rt, operator)
    exported = await export_package(admin_rt, operator.public, "acme/sales", with_dependencies=True)
    assert [w["$path"] for w in exported["workflows"]] == [ORDER["$path"], INVOICE["$path"]]
    assert "dependencies" not in exported
    fresh, admin = other_rt
    imported = await import_package(fresh, admin, json.dumps(exported))
    assert sorted(w.path for w in imported) == [INVOICE["$path"], ORDER["$path"]]
    # the spawn works there: the package granted billing -> sales itself
    pid = (await start_instance(fresh, admin.public, ORDER["$path"], {})).record.id
    await perform_action(fresh, admin.public, pid, "submit", {})
    assert (await verify(fresh)).valid


async def test_a_dependency_the_exporter_may_not_read_stays_a_named_dependency(admin_rt, operator):
    await _sales_spawning_billing(admin_rt, operator)
    seller = generate_keypair().public
    await registry.grant_role(admin_rt, operator, "acme/sales", seller, ["admin"])
    exported = await export_package(admin_rt, seller, "acme/sales", with_dependencies=True)
    assert [w["$path"] for w in exported["workflows"]] == [ORDER["$path"]]
    assert exported["dependencies"] == [{"kind": "workflow", "path": INVOICE["$path"]}]


async def test_a_malformed_dependency_list_is_refused_with_a_pointer(admin_rt, operator):
    bad = package(INVOICE) | {"dependencies": [{"kind": "database", "path": "a/b"}]}
    with pytest.raises(InvalidDefinition) as err:
        await import_package(admin_rt, operator, bad)
    assert [(p.code, p.pointer) for p in err.value.problems] == [
        ("INVALID_FIELD", "/dependencies/0")
    ]
