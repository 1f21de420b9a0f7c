"""`Mutation`: every change of DESIGN §10, each an envelope on the runtime's one path.

Each field calls one resolver and wraps what it returns into the field's type.
"""

from __future__ import annotations

from typing import Annotated

import strawberry
from strawberry.types import Info

from stateward.resolvers import (
    batches,
    delegated,
    idempotency,
    incidents,
    kernel,
    messages,
    operations,
    packages,
    writes,
)
from stateward.schema.inputs import InstanceFilter, SignedEventInput, search_of
from stateward.schema.scalars import JSON
from stateward.schema.types.batches import BatchOperation
from stateward.schema.types.delegated import DelegatedCompletion, LockedDelegatedTask
from stateward.schema.types.incidents import IncidentResult
from stateward.schema.types.instance import Assignment, Instance
from stateward.schema.types.messages import MessagePublication
from stateward.schema.types.operations import MigrationResult
from stateward.schema.types.public import PublicEntry, PublicView
from stateward.schema.types.registry import Registry
from stateward.schema.types.results import (
    ActionResult,
    ApiToken,
    ApiTokenInfo,
    Challenge,
    Session,
    SubmittedEvent,
)
from stateward.schema.types.workflow import Workflow


@strawberry.type
class Mutation:
    """Writes. Bearer callers get server-attested envelopes; `submitEvent` takes signed ones."""

    @strawberry.mutation(description="A single-use login challenge for a public key (120 s).")
    async def auth_challenge(self, info: Info, public_key: str) -> Challenge:
        challenge, expires = await writes.auth_challenge(info, public_key)
        return Challenge(challenge=challenge, expires_at=expires)

    @strawberry.mutation(description="Exchange a signed challenge for a session token.")
    async def auth_login(
        self, info: Info, public_key: str, challenge: str, signature: str
    ) -> Session:
        token, actor, expires = await writes.auth_login(info, public_key, challenge, signature)
        return Session(token=token, actor=actor, expires_at=expires)

    @strawberry.mutation(description="An API token for the viewer (a system admin: any actor).")
    async def create_api_token(
        self, info: Info, label: str | None = None, actor: str | None = None,
        ttl_seconds: float | None = None,
    ) -> ApiToken:  # fmt: skip
        token, label, owner, expires = await writes.create_api_token(
            info, label, actor, ttl_seconds
        )
        return ApiToken(token=token, label=label, actor=owner, expires_at=expires)

    @strawberry.mutation(description="Submit an envelope signed by the client's own key.")
    async def submit_event(
        self, info: Info, event: JSON, signature: str, signer: str
    ) -> ActionResult:
        return ActionResult.from_domain(await writes.submit_event(info, event, signature, signer))

    @strawberry.mutation(
        description="Submit many client-signed envelopes in one request (at most 1000): "
        "applied in order, each all-or-nothing on its own, in one group-commit batch; "
        "one result per item."
    )
    async def submit_events(
        self, info: Info, events: list[SignedEventInput]
    ) -> list[SubmittedEvent]:
        items = [{"event": e.event, "signature": e.signature, "signer": e.signer} for e in events]
        return SubmittedEvent.answers(info, await writes.submit_events(info, items))

    @strawberry.mutation
    async def add_workflow(self, info: Info, definition: JSON) -> Workflow:
        return Workflow.from_version(await writes.add_workflow(info, definition))

    @strawberry.mutation
    async def update_workflow(self, info: Info, definition: JSON) -> Workflow:
        return Workflow.from_version(await writes.update_workflow(info, definition))

    @strawberry.mutation
    async def remove_workflow(self, info: Info, path: str) -> bool:
        return await writes.remove_workflow(info, path)

    @strawberry.mutation
    async def clone_workflow(self, info: Info, source: str, target: str) -> Workflow:
        return Workflow.from_version(await packages.clone_workflow(info, source, target))

    @strawberry.mutation(description="Deploy a package's workflows and modules (all or nothing).")
    async def import_package(self, info: Info, package: JSON) -> list[Workflow]:
        return [Workflow.from_version(w) for w in await packages.import_package(info, package)]

    @strawberry.mutation
    async def add_module(self, info: Info, namespace: str, name: str, source: str) -> Registry:
        return Registry.from_facts(await writes.add_module(info, namespace, name, source))

    @strawberry.mutation
    async def update_module(self, info: Info, namespace: str, name: str, source: str) -> Registry:
        return Registry.from_facts(await writes.update_module(info, namespace, name, source))

    @strawberry.mutation
    async def grant_role(
        self, info: Info, namespace: str, actor: str, roles: list[str]
    ) -> Registry:
        return Registry.from_facts(await writes.grant_role(info, namespace, actor, roles))

    @strawberry.mutation
    async def revoke_role(
        self, info: Info, namespace: str, actor: str, roles: list[str]
    ) -> Registry:
        return Registry.from_facts(await writes.revoke_role(info, namespace, actor, roles))

    @strawberry.mutation(description="Rotate the viewer's key: its grants move to `newKey` "
                         "and it signs nothing more (a system registry event).")  # fmt: skip
    async def rotate_key(self, info: Info, new_key: str) -> ActionResult:
        return ActionResult.from_domain(await writes.rotate_key(info, new_key))

    @strawberry.mutation(description="Revoke a key (system admins): events it signs from now "
                         "on are refused; its history still verifies.")  # fmt: skip
    async def revoke_key(self, info: Info, key: str) -> ActionResult:
        return ActionResult.from_domain(await writes.revoke_key(info, key))

    @strawberry.mutation(
        description="Set (or with a null url remove) the namespace webhook; with `workflow` "
        "(a path of the namespace), that workflow's own, used before the namespace's for its "
        "SLA breaches; with `surface`, the webhook that the delegated stages of that surface "
        "(in the namespace and below) are posted to, each with its callback token. The secret "
        "is never readable."
    )
    async def set_webhook(
        self,
        info: Info,
        namespace: str,
        url: str | None = None,
        secret: str | None = None,
        workflow: str | None = None,
        surface: Annotated[
            str | None,
            strawberry.argument(
                description="A delegated `surface` id: set that surface's webhook instead."
            ),
        ] = None,
    ) -> Registry:
        facts = await writes.set_webhook(info, namespace, url, secret, workflow, surface)
        return Registry.from_facts(facts)

    @strawberry.mutation(
        description="Let workflows of namespace `to` (and below) spawn instances of "
        "`namespace`'s workflows (an `allow_spawn` registry event, admin of `namespace`)."
    )
    async def allow_spawn(self, info: Info, namespace: str, to: str) -> Registry:
        return Registry.from_facts(await writes.grant_reference(info, namespace, to, None, True))

    @strawberry.mutation(description="Withdraw an `allowSpawn` (`disallow_spawn`).")
    async def disallow_spawn(self, info: Info, namespace: str, to: str) -> Registry:
        return Registry.from_facts(await writes.grant_reference(info, namespace, to, None, False))

    @strawberry.mutation(
        description="Let workflows of namespace `to` (and below) name module `name` of "
        "`namespace` as a hook (a `share_module` registry event, admin of `namespace`)."
    )
    async def share_module(self, info: Info, namespace: str, name: str, to: str) -> Registry:
        return Registry.from_facts(await writes.grant_reference(info, namespace, to, name, True))

    @strawberry.mutation(description="Withdraw a `shareModule` (`unshare_module`).")
    async def unshare_module(self, info: Info, namespace: str, name: str, to: str) -> Registry:
        return Registry.from_facts(await writes.grant_reference(info, namespace, to, name, False))

    @strawberry.mutation(
        description="Start an instance; `metadata` (an object) is stored apart from the data: "
        "hooks, delegated surfaces and `Instance.metadata` read it, routing never does."
    )
    async def start_instance(
        self,
        info: Info,
        workflow: str,
        data: JSON | None = None,
        id: strawberry.ID | None = None,
        metadata: JSON | None = None,
    ) -> Instance:
        record = await writes.start_instance(info, workflow, data, id, metadata)
        return Instance.from_record(record)

    @strawberry.mutation
    async def perform_action(
        self, info: Info, instance: strawberry.ID, action: str, input: JSON | None = None
    ) -> ActionResult:
        result = await writes.perform_action(info, instance, action, input)
        return ActionResult.from_domain(result)

    @strawberry.mutation
    async def advance(
        self, info: Info, instance: strawberry.ID, input: JSON | None = None
    ) -> ActionResult:
        return ActionResult.from_domain(await writes.advance(info, instance, input))

    @strawberry.mutation
    async def cancel_instance(
        self, info: Info, instance: strawberry.ID, reason: str | None = None
    ) -> ActionResult:
        return ActionResult.from_domain(await writes.cancel_instance(info, instance, reason))

    @strawberry.mutation
    async def claim_assignment(self, info: Info, id: strawberry.ID) -> Assignment:
        return Assignment.from_record(await kernel.claim(info, id))

    @strawberry.mutation
    async def unclaim_assignment(self, info: Info, id: strawberry.ID) -> Assignment:
        return Assignment.from_record(await kernel.unclaim(info, id))

    @strawberry.mutation(
        description="Complete the viewer's claimed assignment: record `reviewData` and perform "
        "`action` (advance when omitted) with `input`, as `performAction` takes it, in one "
        "event. The action's input gets `reviewData` unless `input` sets it."
    )
    async def complete_assignment(
        self, info: Info, id: strawberry.ID, review_data: JSON | None = None,
        action: str | None = None, input: JSON | None = None,
    ) -> Assignment:  # fmt: skip
        done = await kernel.complete(info, id, review_data, action, input)
        return Assignment.from_record(done)

    @strawberry.mutation(
        description="Revoke one of the viewer's API tokens: it stops working at once. "
        "Another actor's token or an unknown id is NOT_FOUND."
    )
    async def revoke_api_token(
        self, info: Info,
        id: Annotated[strawberry.ID, strawberry.argument(description="The token's id.")],
    ) -> ApiTokenInfo:  # fmt: skip
        record = await writes.revoke_api_token(info, str(id))
        return ApiTokenInfo.from_record(record, info.context.services.runtime.clock.now())

    @strawberry.mutation(
        description="Mark notifications read (node ids or row ids): only the viewer's and its "
        "teams' unread ones change; returns how many did. A team notification is read for "
        "the whole team."
    )
    async def mark_notifications_read(
        self, info: Info,
        ids: Annotated[list[strawberry.ID], strawberry.argument(
            description="The notifications (at most 100).")],
    ) -> int:  # fmt: skip
        return len(await kernel.mark_notifications_read(info, [str(i) for i in ids]))

    @strawberry.mutation
    async def cancel_assignment(self, info: Info, id: strawberry.ID) -> Assignment:
        return Assignment.from_record(await kernel.cancel(info, id))

    @strawberry.mutation
    async def issue_entry_token(self, info: Info, instance: strawberry.ID) -> str:
        return await kernel.issue_entry_token(info, instance)

    @strawberry.mutation(description="Start a workflow whose initial state is public.")
    async def start_public(
        self, info: Info, workflow: str, data: JSON | None = None
    ) -> PublicEntry:
        token, view = await kernel.start_public(info, workflow, data)
        return PublicEntry(token=token, view=PublicView.from_domain(view))

    @strawberry.mutation(
        description="Lock a delegated task for `seconds` (1..86400) and get a callback token "
        "valid until then: the same optimistic claim as assignments (`ALREADY_CLAIMED` while "
        "another worker's lock runs; a crashed worker's lock lapses). Needs `worker`, "
        "`operator` or `admin` in the task's namespace."
    )
    async def lock_delegated_task(
        self, info: Info,
        id: Annotated[strawberry.ID, strawberry.argument(
            description="The task's id (`DelegatedTask.id`).")],
        seconds: Annotated[int, strawberry.argument(
            description="How long the lock (and its token) lasts.")] = 300,
    ) -> LockedDelegatedTask:  # fmt: skip
        locked = await delegated.lock_delegated_task(info, str(id), seconds)
        return LockedDelegatedTask.from_domain(locked)

    @strawberry.mutation(
        description="Complete a delegated stage with its callback token (from the surface "
        "webhook or `lockDelegatedTask`): perform `action` (one of the stage's actions) or, "
        "without it, advance. No bearer token is needed; the callback token acts on that "
        "stage of that instance only (`DELEGATION_CLOSED` once it was left, "
        "`DELEGATION_EXPIRED` after its time or once another worker locked the task)."
    )
    async def complete_delegated_task(
        self, info: Info,
        token: Annotated[str, strawberry.argument(description="The callback token.")],
        action: Annotated[str | None, strawberry.argument(
            description="The action to perform (default: advance).")] = None,
        input: Annotated[JSON | None, strawberry.argument(
            description="The action's input (form fields, etc.).")] = None,
    ) -> DelegatedCompletion:  # fmt: skip
        result = await delegated.complete_delegated_task(info, token, action, input)
        return DelegatedCompletion.from_domain(result)

    @strawberry.mutation(description="A visitor acts (or advances) on its current step.")
    async def advance_public(
        self, info: Info, token: str, action: str | None = None, input: JSON | None = None
    ) -> PublicView:
        return PublicView.from_domain(await kernel.advance_public(info, token, action, input))

    @strawberry.mutation(
        description="Publish a message: its action is performed on every active instance of "
        "the namespace (or below) waiting for it with this correlation key; kept "
        "`ttlSeconds` for instances still to arrive; `messageId` makes it idempotent. "
        "Needs admin or operator in the namespace."
    )
    async def publish_message(
        self, info: Info, namespace: str, name: str, correlation_key: str,
        payload: JSON | None = None, ttl_seconds: int = 0, message_id: str | None = None,
    ) -> MessagePublication:  # fmt: skip
        return MessagePublication.from_result(
            await messages.publish_message(
                info, namespace, name, correlation_key, payload, ttl_seconds, message_id
            )
        )

    @strawberry.mutation(
        description="Cancel every instance the filter matches (admin or operator), in the "
        "background: one event per instance."
    )
    async def bulk_cancel(
        self, info: Info, filter: InstanceFilter, reason: str | None = None
    ) -> BatchOperation:
        return BatchOperation.from_record(
            await batches.bulk_cancel(info, search_of(filter), reason)
        )

    @strawberry.mutation(
        description="Perform an action (as the system) on every instance the filter matches."
    )
    async def bulk_action(
        self, info: Info, filter: InstanceFilter, action: str, input: JSON | None = None
    ) -> BatchOperation:
        return BatchOperation.from_record(
            await batches.bulk_action(info, search_of(filter), action, input)
        )

    @strawberry.mutation(
        description="Migrate every instance the filter matches to `toVersion` of its workflow "
        "(admin or operator), in the background: one `$migrate` event per instance."
    )
    async def bulk_migrate(
        self, info: Info, filter: InstanceFilter, to_version: int, state_map: JSON | None = None
    ) -> BatchOperation:
        return BatchOperation.from_record(
            await batches.bulk_migrate(info, search_of(filter), to_version, state_map)
        )

    @strawberry.mutation(
        description="Re-run the failed hook of an open incident with the module deployed "
        "now (a `$retry` event recording its hash; admin or operator of the namespace). On "
        "success the instance goes on and the incident is resolved; on failure `attempts` "
        "grows."
    )
    async def retry_incident(
        self,
        info: Info,
        id: Annotated[strawberry.ID, strawberry.argument(description="The incident.")],
    ) -> IncidentResult:
        return IncidentResult.from_domain(*await incidents.retry(info, id))

    @strawberry.mutation(
        description="Resolve an open incident instead of retrying (a `$resolve` event; "
        "admin or operator of the namespace): `action` `$cancel` cancels the instance, any "
        "other name performs that action of its current state with `input`."
    )
    async def resolve_incident(
        self,
        info: Info,
        id: Annotated[strawberry.ID, strawberry.argument(description="The incident.")],
        action: Annotated[str, strawberry.argument(description="An action name, or `$cancel`.")],
        input: Annotated[
            JSON | None, strawberry.argument(description="The action's input (an object).")
        ] = None,
    ) -> IncidentResult:
        return IncidentResult.from_domain(*await incidents.resolve(info, id, action, input))

    @strawberry.mutation(
        description="Retry every instance in `error` the filter matches (admin or operator), "
        "in the background: one `$retry` event per instance (its hook runs again with the "
        "module deployed then); instances not in error are reported as failed items."
    )
    async def bulk_retry(
        self,
        info: Info,
        filter: Annotated[
            InstanceFilter, strawberry.argument(description="Which instances to retry.")
        ],
    ) -> BatchOperation:
        return BatchOperation.from_record(await batches.bulk_retry(info, search_of(filter)))

    @strawberry.mutation(description="Stop a running bulk operation (what was applied stays).")
    async def cancel_batch_operation(self, info: Info, id: strawberry.ID) -> BatchOperation:
        return BatchOperation.from_record(await batches.cancel_batch_operation(info, id))

    @strawberry.mutation(
        description="Move an instance to another version of its workflow (a `$migrate` "
        "event; admin or operator of its namespace). `stateMap` maps old state keys to new "
        "ones (identity by default), `mutate` is a DSL data mutation applied in the same "
        "event; `dryRun` returns the plan (with its problems) and writes nothing."
    )
    async def migrate_instance(
        self, info: Info, instance: strawberry.ID, to_version: int, state_map: JSON | None = None,
        mutate: JSON | None = None, dry_run: bool = False,
    ) -> MigrationResult:  # fmt: skip
        result = await operations.migrate(info, instance, to_version, state_map, mutate, dry_run)
        return MigrationResult.from_domain(result)


#: Mutations that write no event (sessions, tokens, task locks), take a client-signed envelope or
#: have their own idempotency key (`publishMessage`'s messageId).
_NOT_KEYED = frozenset(
    {
        "auth_challenge",
        "auth_login",
        "create_api_token",
        "submit_event",
        "publish_message",
        "bulk_cancel",
        "bulk_action",
        "bulk_retry",
        "cancel_batch_operation",
        "lock_delegated_task",
    }
)
idempotency.add_to(Mutation, skip=_NOT_KEYED)
