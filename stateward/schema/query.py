"""`Query`: the read side of DESIGN §10 (names fixed; every resolver is in `resolvers/`).

Each field calls one resolver and wraps what it returns into the field's type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import strawberry
from strawberry.types import Info

from stateward.resolvers import (
    batches,
    delegated,
    incidents,
    kernel,
    log,
    nodes,
    packages,
    reads,
    search,
    webhooks,
    writes,
)
from stateward.resolvers.paging import Window
from stateward.schema.enums import (
    AssignmentGroup,
    AssignmentOrderField,
    AssignmentStatus,
    InstanceGroup,
    SortDirection,
    WebhookDeliveryStatus,
)
from stateward.schema.inputs import (
    AssignmentFilter,
    AssignmentOrder,
    AuditFilter,
    AuditOrder,
    IncidentFilter,
    InstanceFilter,
    InstanceOrder,
    ordering_of,
    search_of,
)
from stateward.schema.scalars import JSON
from stateward.schema.types.batches import BatchOperation
from stateward.schema.types.connection import Connection
from stateward.schema.types.counts import AssignmentCount, InstanceCount
from stateward.schema.types.delegated import DelegatedTask
from stateward.schema.types.incidents import Incident
from stateward.schema.types.instance import Actor, Assignment, Event, Instance
from stateward.schema.types.log import Checkpoint, ConsistencyProof, InclusionProof
from stateward.schema.types.node import Node
from stateward.schema.types.public import PublicView
from stateward.schema.types.registry import Registry
from stateward.schema.types.results import (
    ApiTokenInfo,
    Notification,
    ValidationReport,
    Verification,
)
from stateward.schema.types.webhook import WebhookDelivery
from stateward.schema.types.workflow import Action, State, Workflow

#: How `node(id)` wraps what `resolvers.nodes.node` found, by type name.
NODE_TYPES: dict[str, Callable[[Any], Node]] = {
    "Registry": Registry.from_facts,
    "Workflow": lambda w: Workflow.from_domain(w.definition, w.version, w.created_at, w.removed),
    "State": lambda ws: State.from_domain(ws[0].definition, ws[0].version, ws[1]),
    "Action": lambda wa: Action.from_domain(wa[0].definition, wa[0].version, wa[1]),
    "Instance": Instance.from_record,
    "Event": Event.from_record,
    "Assignment": Assignment.from_record,
    "Notification": Notification.from_record,
    "BatchOperation": BatchOperation.from_record,
    "Incident": Incident.from_record,
}


# The four paging arguments of a two-way connection, described once.
PageFirst = Annotated[
    int | None, strawberry.argument(description="Page size forward (default 20, at most 100).")
]
PageAfter = Annotated[str | None, strawberry.argument(description="Cursor to page forward from.")]
PageLast = Annotated[
    int | None, strawberry.argument(description="Page size backward (at most 100).")
]
PageBefore = Annotated[str | None, strawberry.argument(description="Cursor to page backward from.")]


@strawberry.type
class Query:
    """Reads; limited to namespaces where the viewer holds a role."""

    @strawberry.field(description="Any object by its Relay global id.")
    async def node(self, info: Info, id: strawberry.ID) -> Node | None:
        type_name, found = await nodes.node(info, id)
        return NODE_TYPES[type_name](found)

    @strawberry.field(description="A bulk operation (its creator's, or any for a system admin).")
    async def batch_operation(self, info: Info, id: strawberry.ID) -> BatchOperation:
        return BatchOperation.from_record(await batches.batch_operation(info, id))

    @strawberry.field(description="Bulk operations, newest first (the viewer's own).")
    async def batch_operations(
        self, info: Info, first: int | None = None, after: str | None = None,
        last: int | None = None, before: str | None = None,
    ) -> Connection[BatchOperation]:  # fmt: skip
        page = await batches.batch_operations(info, first, after, last, before)
        return Connection.of(page, BatchOperation.from_record)

    @strawberry.field(
        description="Incidents (failures that stopped instances), newest first, in the "
        "namespaces where the viewer holds admin or operator (all for a system admin)."
    )
    async def incidents(
        self,
        info: Info,
        filter: Annotated[
            IncidentFilter | None, strawberry.argument(description="Which incidents.")
        ] = None,
        first: Annotated[
            int | None, strawberry.argument(description="Page size (default 20, at most 100).")
        ] = None,
        after: Annotated[
            str | None, strawberry.argument(description="The cursor to page after.")
        ] = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Connection[Incident]:
        f = filter or IncidentFilter()
        page = await incidents.incidents(
            info, f.namespace, f.workflow, [str(k.value) for k in f.kind or ()], f.resolved,
            f.instance, first, after, last, before,
        )  # fmt: skip
        return Connection.of(page, Incident.from_record)

    @strawberry.field(description="The authenticated actor (null when anonymous).")
    def viewer(self, info: Info) -> Actor | None:
        actor = reads.viewer_actor(info)
        return None if actor is None else Actor(id=actor)

    @strawberry.field(description="The deployment id every envelope must name as `net`.")
    def net(self, info: Info) -> str:
        return info.context.services.runtime.net  # type: ignore[no-any-return]

    @strawberry.field(description="Namespaces the viewer may read.")
    async def namespaces(self, info: Info) -> list[str]:
        return await reads.namespaces(info)

    @strawberry.field
    async def registry(self, info: Info, namespace: str) -> Registry:
        return Registry.from_facts(await reads.registry_of(info, namespace))

    @strawberry.field(description="A workflow version (the latest unless `version`).")
    async def workflow(self, info: Info, path: str, version: int | None = None) -> Workflow:
        w = await reads.workflow(info, path, version)
        return Workflow.from_domain(w.definition, w.version, w.created_at, w.removed)

    @strawberry.field(description="Latest versions of live workflows (one namespace or all).")
    async def workflows(
        self, info: Info, namespace: str | None = None, first: int | None = None,
        after: str | None = None, last: int | None = None, before: str | None = None,
    ) -> Connection[Workflow]:  # fmt: skip
        page = await reads.workflows(info, namespace, first, after, last, before)
        return Connection.of(page, Workflow.from_version)

    @strawberry.field(description="An instance by UUID or node id.")
    async def instance(self, info: Info, id: strawberry.ID) -> Instance:
        return Instance.from_record(await reads.instance(info, id))

    @strawberry.field(
        description="Instances the viewer may read that match `filter`, sorted by `orderBy` "
        "(default: oldest first); page forward with `first/after` or backward with "
        "`last/before`."
    )
    async def instances(
        self, info: Info,
        filter: Annotated[InstanceFilter | None, strawberry.argument(
            description="Which instances (omitted: all the viewer may read).")] = None,
        order_by: Annotated[InstanceOrder | None, strawberry.argument(
            description="Sort key and direction (default: CREATED ascending).")] = None,
        first: PageFirst = None,
        after: PageAfter = None,
        last: PageLast = None,
        before: PageBefore = None,
    ) -> Connection[Instance]:  # fmt: skip
        page = await search.instances(
            info, search_of(filter), ordering_of(order_by), Window.of(first, after, last, before)
        )
        return Connection.of(page, Instance.from_record)

    @strawberry.field(
        description="Instances the viewer may read that match `filter`, counted by the "
        "`groupBy` fields (GROUP BY in SQL; at most 1000 rows, sorted by the groups)."
    )
    async def instance_counts(
        self, info: Info,
        group_by: Annotated[list[InstanceGroup], strawberry.argument(
            description="One to three distinct fields to group by.")],
        filter: Annotated[InstanceFilter | None, strawberry.argument(
            description="Which instances (omitted: all the viewer may read).")] = None,
    ) -> list[InstanceCount]:  # fmt: skip
        groups = tuple(str(g.value) for g in group_by)
        rows = await search.instance_counts(info, search_of(filter), groups)
        return [InstanceCount.from_row(r) for r in rows]

    @strawberry.field(
        description="Assignments of instances the viewer may read that match `filter`, "
        "counted by the `groupBy` fields (at most 1000 rows, sorted by the groups)."
    )
    async def assignment_counts(
        self, info: Info,
        group_by: Annotated[list[AssignmentGroup], strawberry.argument(
            description="One to three distinct fields to group by.")],
        filter: Annotated[AssignmentFilter | None, strawberry.argument(
            description="Which assignments (omitted: all the viewer may read).")] = None,
    ) -> list[AssignmentCount]:  # fmt: skip
        groups = tuple(str(g.value) for g in group_by)
        wanted = AssignmentFilter() if filter is None else filter
        rows = await search.assignment_counts(info, wanted.to_search(), groups)
        return [AssignmentCount.from_row(r) for r in rows]

    @strawberry.field(
        description="Assignments the viewer may see (its teams' queues, every team's where "
        "it is admin, its own claims and candidacies) that match `filter`, sorted by "
        "`orderBy` (default: oldest first); page forward with `first/after` or backward "
        "with `last/before`."
    )
    async def assignments(
        self, info: Info,
        filter: Annotated[AssignmentFilter | None, strawberry.argument(
            description="Which assignments (omitted: all the viewer may see).")] = None,
        order_by: Annotated[AssignmentOrder | None, strawberry.argument(
            description="Sort key and direction (default: CREATED ascending).")] = None,
        first: PageFirst = None,
        after: PageAfter = None,
        last: PageLast = None,
        before: PageBefore = None,
        team: Annotated[str | None, strawberry.argument(
            description="The queue's team (same as `filter.team`).",
            deprecation_reason="Use `filter: {team}`.")] = None,
        status: Annotated[AssignmentStatus | None, strawberry.argument(
            description="One status (same as `filter.status`).",
            deprecation_reason="Use `filter: {status}`.")] = None,
    ) -> Connection[Assignment]:  # fmt: skip
        wanted = (filter or AssignmentFilter()).with_legacy(team, status).to_search()
        order = (
            AssignmentOrder(field=AssignmentOrderField.CREATED) if order_by is None else order_by
        )
        page = await search.assignments(
            info, wanted, order.to_ordering(), Window.of(first, after, last, before)
        )
        return Connection.of(page, Assignment.from_record)

    @strawberry.field(
        description="Open delegated stages the viewer may work on (it holds `worker`, "
        "`operator` or `admin` in their namespace or above), oldest first."
    )
    async def delegated_tasks(
        self, info: Info,
        surface: Annotated[str | None, strawberry.argument(
            description="Only tasks of this surface.")] = None,
        namespace: Annotated[str | None, strawberry.argument(
            description="Only tasks of this namespace and the namespaces below it.")] = None,
        available_only: Annotated[bool, strawberry.argument(
            description="Leave out tasks whose lock has not lapsed yet.")] = False,
        first: int | None = None, after: str | None = None, last: int | None = None,
        before: str | None = None,
    ) -> Connection[DelegatedTask]:  # fmt: skip
        page = await delegated.delegated_tasks(
            info, surface, namespace, available_only, first, after, last, before
        )
        return Connection.of(page, DelegatedTask.from_domain)

    @strawberry.field(
        description="Assignments the viewer claimed, and unassigned ones naming it among "
        "their candidate users; oldest first."
    )
    async def my_assignments(
        self, info: Info, status: AssignmentStatus | None = None, first: PageFirst = None,
        after: PageAfter = None, last: PageLast = None, before: PageBefore = None,
    ) -> Connection[Assignment]:  # fmt: skip
        wanted = None if status is None else str(status.value)
        page = await kernel.my_queue(info, wanted, Window.of(first, after, last, before))
        return Connection.of(page, Assignment.from_record)

    @strawberry.field(description="A process's signed log (instance or registry), by seq.")
    async def events(
        self, info: Info, process: strawberry.ID, first: int | None = None,
        after: str | None = None, last: int | None = None, before: str | None = None,
    ) -> Connection[Event]:  # fmt: skip
        page = await reads.process_events(info, process, first, after, last, before)
        return Connection.of(page, Event.from_record)

    @strawberry.field(
        description="Every event of every process the viewer may read (instances and "
        "registries), newest first by default, filtered; `totalCount` counts all matches."
    )
    async def audit_log(
        self, info: Info,
        filter: Annotated[AuditFilter | None, strawberry.argument(
            description="Which events (omitted: all the viewer may read).")] = None,
        order_by: Annotated[AuditOrder | None, strawberry.argument(
            description="Direction (default: newest first).")] = None,
        first: PageFirst = None,
        after: PageAfter = None,
        last: PageLast = None,
        before: PageBefore = None,
    ) -> Connection[Event]:  # fmt: skip
        wanted = AuditFilter() if filter is None else filter
        descending = order_by is None or order_by.direction == SortDirection.DESC
        page = await search.audit_log(
            info, wanted.to_search(), descending, Window.of(first, after, last, before)
        )
        return Connection.of(page, Event.from_record)

    @strawberry.field(description="The viewer's and its teams' notifications, newest first.")
    async def notifications(
        self, info: Info, first: PageFirst = None, after: PageAfter = None,
        unread_only: bool = False, last: PageLast = None, before: PageBefore = None,
    ) -> Connection[Notification]:  # fmt: skip
        window = Window.of(first, after, last, before)
        page = await kernel.notifications(info, window, unread_only)
        return Connection.of(page, Notification.from_record)

    @strawberry.field(description="The viewer's API tokens, newest first (never a secret).")
    async def api_tokens(self, info: Info) -> list[ApiTokenInfo]:
        now = info.context.services.runtime.clock.now()
        return [ApiTokenInfo.from_record(t, now) for t in await writes.api_tokens(info)]

    @strawberry.field(description="How many of the viewer's and its teams' notifications "
                      "are unread.")  # fmt: skip
    async def unread_count(self, info: Info) -> int:
        return await kernel.unread_count(info)

    @strawberry.field(description="A namespace's webhook deliveries, newest first (admins).")
    async def webhook_deliveries(
        self, info: Info, namespace: str, status: WebhookDeliveryStatus | None = None,
        first: int | None = None, after: str | None = None, last: int | None = None,
        before: str | None = None,
    ) -> Connection[WebhookDelivery]:  # fmt: skip
        wanted = None if status is None else str(status.value)
        page = await webhooks.webhook_deliveries(
            info, namespace, wanted, first, after, last, before
        )
        return Connection.of(page, WebhookDelivery.from_record)

    @strawberry.field(description="A visitor's view of its instance (no login needed).")
    async def public_entry(self, info: Info, token: str) -> PublicView:
        return PublicView.from_domain(await kernel.public_entry(info, token))

    @strawberry.field(description="Re-check signatures, hash chain and replay of a process.")
    async def verify_process(self, info: Info, id: strawberry.ID) -> Verification:
        return Verification.from_domain(await reads.verify_process(info, id))

    @strawberry.field(
        description="A package of workflows and modules of a namespace. `withDependencies`: "
        "also the workflows they spawn in other namespaces (what is left out is listed "
        "under `dependencies`)."
    )
    async def export_package(
        self, info: Info, namespace: str, paths: list[str] | None = None,
        with_dependencies: bool = False,
    ) -> JSON:  # fmt: skip
        return await packages.export_package(info, namespace, paths, with_dependencies)

    @strawberry.field(description="Validate a definition without deploying it.")
    async def validate_workflow(self, info: Info, definition: JSON) -> ValidationReport:
        return ValidationReport.from_domain(await reads.validate(info, definition))

    @strawberry.field(description="The newest signed checkpoint of the deployment log.")
    async def checkpoint(self, info: Info) -> Checkpoint | None:
        found = await log.latest_checkpoint(info)
        return None if found is None else Checkpoint.from_record(found)

    @strawberry.field(description="Every kept checkpoint of the deployment log, oldest first.")
    async def checkpoints(
        self, info: Info, first: int | None = None, after: str | None = None,
        last: int | None = None, before: str | None = None,
    ) -> Connection[Checkpoint]:  # fmt: skip
        page = await log.checkpoint_page(info, first, after, last, before)
        return Connection.of(page, Checkpoint.from_record)

    @strawberry.field(description="RFC 9162 inclusion proof of event `seq` of `process` in "
                      "the tree of `size` leaves (default: the current tree).")  # fmt: skip
    async def event_proof(
        self, info: Info, process: strawberry.ID, seq: int, size: int | None = None
    ) -> InclusionProof:
        return InclusionProof.from_domain(await log.event_proof(info, process, seq, size))

    @strawberry.field(description="RFC 9162 consistency proof that the tree of `from` leaves "
                      "is a prefix of the tree of `to` (default: the current tree).")  # fmt: skip
    async def consistency_proof(
        self,
        info: Info,
        from_: Annotated[int, strawberry.argument(name="from")],
        to: int | None = None,
    ) -> ConsistencyProof:
        return ConsistencyProof.from_domain(await log.consistency_proof(info, from_, to))
