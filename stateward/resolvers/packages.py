"""Package resolvers: `exportPackage`, `importPackage` (all-or-nothing) and `cloneWorkflow`."""

from __future__ import annotations

from typing import Any

from strawberry.types import Info

from stateward.resolvers.context import runtime, viewer
from stateward.runtime.access.registry import DeployedWorkflow
from stateward.runtime.packages import transfer as packages


async def export_package(
    info: Info, namespace: str, paths: list[str] | None, with_dependencies: bool = False
) -> Any:
    """`exportPackage(namespace, paths, withDependencies)`: `{"format": "stateward.package/1",
    ...}`."""
    return await packages.export_package(
        runtime(info), viewer(info), namespace, paths, with_dependencies=with_dependencies
    )


async def import_package(info: Info, package: Any) -> list[DeployedWorkflow]:
    """`importPackage(package)`: every workflow and module of it, or none."""
    return list(await packages.import_package(runtime(info), viewer(info).actor, package))


async def clone_workflow(info: Info, source: str, target: str) -> DeployedWorkflow:
    """`cloneWorkflow(source, target)`: the latest `source` deployed again at `target`."""
    return await packages.clone_workflow(runtime(info), viewer(info).actor, source, target)
