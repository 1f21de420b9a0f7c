"""Package resolvers: `exportPackage` and `importPackage` (all-or-nothing).

They call `stateward.runtime.packages` (`export_package`, `import_package`), imported
lazily so the schema builds before that module exists.
"""

from __future__ import annotations

import importlib
from typing import Any

from strawberry.types import Info

from stateward.resolvers.context import require_read, runtime, viewer
from stateward.schema.types.workflow import Workflow


def _packages() -> Any:
    return importlib.import_module("stateward.runtime.packages")


async def export_package(info: Info, namespace: str, paths: list[str] | None) -> Any:
    """`exportPackage(namespace, paths)`: `{"format": "stateward.package/1", ...}`."""
    require_read(info, namespace, f"namespace {namespace}")
    return await _packages().export_package(runtime(info), namespace, paths)


async def import_package(info: Info, package: Any) -> list[Workflow]:
    """`importPackage(package)`: every workflow and module of it, or none."""
    deployed = await _packages().import_package(runtime(info), viewer(info).actor, package)
    return [
        Workflow.from_domain(w.definition, w.version, getattr(w, "created_at", None))
        for w in deployed
    ]
