"""Packages, cloning and analytics through the API."""

from __future__ import annotations

from graph_stack import Api, loan

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"


async def test_a_package_exported_from_one_namespace_imports_into_another(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    exported = (await api.ok('{exportPackage(namespace:"acme")}'))["exportPackage"]
    assert exported["format"] == "stateward.package/1"
    assert [w["$path"] for w in exported["workflows"]] == ["acme/loans/loan"]
    package = {**exported, "workflows": [loan("beta/loans/loan")]}
    package.pop("namespace", None)
    imported = await api.ok("mutation($p:JSON!){importPackage(package:$p){path version}}",
                            {"p": package})  # fmt: skip
    assert imported["importPackage"] == [{"path": "beta/loans/loan", "version": 1}]


async def test_a_broken_package_deploys_nothing(api: Api) -> None:
    bad = loan("beta/loans/bad")
    bad["initial"] = "nowhere"
    package = {"format": "stateward.package/1", "workflows": [loan("beta/loans/ok"), bad],
               "modules": []}  # fmt: skip
    body = await api.gql("mutation($p:JSON!){importPackage(package:$p){path}}", {"p": package})
    assert body["errors"][0]["extensions"]["code"] == "INVALID_DEFINITION"
    listed = await api.ok('{workflows(namespace:"beta/loans"){edges{node{path}}}}')
    assert listed["workflows"]["edges"] == []


async def test_clone_deploys_a_copy_at_the_target(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    cloned = await api.ok('mutation{cloneWorkflow(source:"acme/loans/loan",'
                          'target:"acme/loans/loan-copy"){path version hash}}')  # fmt: skip
    assert cloned["cloneWorkflow"]["path"] == "acme/loans/loan-copy"
    again = await api.gql('mutation{cloneWorkflow(source:"acme/loans/loan",'
                          'target:"acme/loans/loan-copy"){path}}')  # fmt: skip
    assert again["errors"][0]["extensions"]["code"] == "CONFLICT"


async def test_workflow_analytics_count_instances(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    for _ in range(2):
        await api.ok('mutation{startInstance(workflow:"acme/loans/loan"){id}}')
    data = await api.ok(
        '{workflow(path:"acme/loans/loan"){analytics{started statusCounts{status count}}}}'
    )
    figures = data["workflow"]["analytics"]
    assert figures["started"] == 2
    assert figures["statusCounts"] == [{"status": "ACTIVE", "count": 2}]


async def test_export_package_with_dependencies_adds_the_spawned_workflows(api: Api) -> None:
    child = loan("acme/billing/fee")
    parent = loan("acme/loans/loan")
    parent["actions"]["approve"]["spawn"] = [{"workflow": "acme/billing/fee"}]
    await api.ok(DEPLOY, {"d": child})
    await api.ok('mutation{allowSpawn(namespace:"acme/billing",to:"acme/loans"){namespace}}')
    await api.ok(DEPLOY, {"d": parent})
    query = 'query($w:Boolean!){exportPackage(namespace:"acme/loans",withDependencies:$w)}'
    bare = (await api.ok(query, {"w": False}))["exportPackage"]
    assert bare["dependencies"] == [{"kind": "workflow", "path": "acme/billing/fee"}]
    full = (await api.ok(query, {"w": True}))["exportPackage"]
    assert [w["$path"] for w in full["workflows"]] == ["acme/loans/loan", "acme/billing/fee"]
    assert "dependencies" not in full
