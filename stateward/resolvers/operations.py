"""Resolvers of operating instances (issue 15): migration, incidents.

Thin: read the viewer, call the runtime's `operate` service, return its records; the
role rule (admin or operator of the instance's namespace) is the runtime's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strawberry.types import Info

from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.resolvers.context import runtime, viewer
from stateward.resolvers.ids import local_id
from stateward.runtime.operate.migration import MigrationResult, migrate_instance


def _object_or_none(value: Any, name: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise DomainError(INVALID_INPUT, f"{name} must be a JSON object", pointer=f"/{name}")
    return dict(value)


async def migrate(
    info: Info,
    instance: str,
    to_version: int,
    state_map: Any,
    mutate: Any,
    dry_run: bool,
) -> MigrationResult:
    """`migrateInstance(instance, toVersion, stateMap, mutate, dryRun)`."""
    return await migrate_instance(
        runtime(info),
        viewer(info).actor,
        local_id(instance, "Instance"),
        to_version,
        _object_or_none(state_map, "stateMap"),
        _object_or_none(mutate, "mutate"),
        dry_run=dry_run,
    )
