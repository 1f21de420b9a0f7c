"""A namespace's registry: its workflows, members (role grants) and hook modules."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import strawberry
from strawberry.types import Info

from stateward.domain.paths import registry_id
from stateward.records import GrantRecord, ModuleRecord
from stateward.resolvers import reads
from stateward.resolvers.ids import to_global_id
from stateward.schema.types.connection import Connection
from stateward.schema.types.node import Node

if TYPE_CHECKING:
    from stateward.runtime.core.queries import RegistryFacts
    from stateward.schema.types.workflow import Workflow

WorkflowRef = Annotated["Workflow", strawberry.lazy("stateward.schema.types.workflow")]


@strawberry.type
class Member:
    """An actor and the roles it was granted in this registry."""

    actor: str
    roles: list[str]


@strawberry.type
class Module:
    """The latest version of a Starlark hook module of the namespace."""

    namespace: str
    name: str
    version: int
    hash: str
    source: str
    created_at: datetime

    @classmethod
    def from_record(cls, record: ModuleRecord) -> Module:
        """The module row `record`."""
        return cls(
            namespace=record.namespace, name=record.name, version=record.version,
            hash=record.hash, source=record.source, created_at=record.created_at,
        )  # fmt: skip


@strawberry.type
class SharedModule:
    """A module of this namespace that other namespaces may name as a hook."""

    name: str
    namespaces: list[str]


@strawberry.type
class Registry(Node):
    """The governed registry of one namespace (a process of the bootstrap workflow)."""

    namespace: str
    process_id: str
    exists: bool
    seq: int
    members: list[Member]
    modules: list[Module]
    webhook_url: str | None = strawberry.field(
        default=None, description="Where SLA breaches are posted (its secret is never shown)."
    )
    spawn_allowed: list[str] = strawberry.field(
        default_factory=list,
        description="Namespaces (and those below them) allowed to spawn this namespace's "
        "workflows (`allowSpawn`).",
    )
    shared_modules: list[SharedModule] = strawberry.field(
        default_factory=list, description="Modules shared with other namespaces (`shareModule`)."
    )

    @classmethod
    def from_facts(cls, facts: RegistryFacts) -> Registry:
        """The registry a resolver read (`runtime.core.queries.RegistryFacts`)."""
        process = facts.process
        return cls.from_records(
            facts.namespace, registry_id(facts.namespace),
            process.seq if process is not None else None, facts.members, facts.modules,
            process.data if process is not None else None,
        )  # fmt: skip

    @classmethod
    def from_records(
        cls, namespace: str, process_id: str, seq: int | None,
        grants: list[GrantRecord], modules: list[ModuleRecord],
        data: Mapping[str, Any] | None = None,
    ) -> Registry:  # fmt: skip
        """The registry of `namespace` from its grants, modules and process `data`."""
        hook = (data or {}).get("webhook")
        by_actor: dict[str, list[str]] = {}
        for g in grants:
            by_actor.setdefault(g.actor, []).append(g.role)
        return cls(
            id=strawberry.ID(to_global_id("Registry", namespace)), namespace=namespace,
            process_id=process_id, exists=seq is not None, seq=seq or 0,
            members=[Member(actor=a, roles=sorted(r)) for a, r in sorted(by_actor.items())],
            modules=[Module.from_record(m) for m in modules],
            webhook_url=hook.get("url") if isinstance(hook, Mapping) else None,
            spawn_allowed=list((data or {}).get("spawn_allowed") or ()),
            shared_modules=[
                SharedModule(name=n, namespaces=list(c))
                for n, c in sorted(((data or {}).get("shared_modules") or {}).items())
            ],
        )  # fmt: skip

    @strawberry.field(description="The latest version of each live workflow, by path.")
    async def workflows(
        self, info: Info, first: int | None = None, after: str | None = None,
        last: int | None = None, before: str | None = None,
    ) -> Connection[WorkflowRef]:  # fmt: skip
        from stateward.schema.types.workflow import Workflow

        page = await reads.workflows(info, self.namespace, first, after, last, before)
        return Connection.of(page, Workflow.from_version)
