"""The authorization matrix (issue 10): every Query, Mutation and Subscription field ×
actor class × own/foreign object, against the real app, on SQLite and PostgreSQL.

Actor classes (`matrix_world.ACTORS`): the system admin; `acme`'s tenant admin (admin at
`acme`); an `acme` member (analyst at `acme/sales`); the other tenant's member (analyst
at `globex/sales`); a key with no grants; an anonymous caller; a visitor (no bearer
token; it holds the entry token of an `acme` public instance). Objects: `acme`'s (own
for the acme actors) and `globex`'s (foreign to them, own to the other tenant's member).

`EXPECTED` is the table: per field, one answer per actor class and object, written
`acme/globex` in actor order. Answers: `ok` (data, and for listings the object is in
it), `--` (a listing or stream that silently leaves the object out), or an error code
abbreviation (`CODES`). The field list comes from introspection: an operation without a
row fails `test_every_operation_has_a_row`. Rows marked `node:<Type>` try `node(id)`
for every node type. For `publicEntry`/`advancePublic` the token is the credential:
the `acme` column uses a real entry token, the `globex` one a forged token.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
import websockets
from graph_stack import open_stack
from matrix_world import ACTORS, SCORING, Matrix, build, fresh_key, node_id, public_form
from tenant_world import ACT, serve

from stateward.governance.keys import generate_keypair

pytestmark = pytest.mark.asyncio(loop_scope="module")

CODES = {
    "NOT_FOUND": "NF", "FORBIDDEN": "FB", "UNAUTHENTICATED": "UA", "INVALID_INPUT": "II",
    "INVALID_DEFINITION": "ID", "BAD_SIGNATURE": "BS", "WRONG_STATE": "WS",
}  # fmt: skip
Prepare = Callable[[Matrix, str, str], Awaitable[tuple[str, dict[str, Any]]]]
Seen = Callable[[Any, Matrix, str], bool]

# Expected answers: actor classes in the order of ACTORS, `acme/globex` each.
READ = "ok/ok ok/NF ok/NF NF/ok NF/NF UA/UA UA/UA"  # the read rule
ADMIN = "ok/ok ok/FB FB/FB FB/FB FB/FB UA/UA UA/UA"  # governance: admin of the namespace
LISTED = "ok/ok ok/-- ok/-- --/ok --/-- UA/UA UA/UA"  # listings skip the unreadable
ANYONE = "ok/ok ok/ok ok/ok ok/ok ok/ok ok/ok ok/ok"
SIGNED_IN = "ok/ok ok/ok ok/ok ok/ok ok/ok UA/UA UA/UA"
TOKEN = "ok/NF ok/NF ok/NF ok/NF ok/NF ok/NF ok/NF"  # the entry token is the credential


@dataclass(frozen=True)
class Case:
    prepare: Prepare
    expected: str
    seen: Seen | None = None  # for listings: is the object in the answer?
    trigger: Callable[[Matrix, str], Awaitable[None]] | None = None  # subscriptions
    only: tuple[str, ...] = ACTORS  # actor classes actually tried


def q(query: str, variables: Callable[[Matrix, str], dict[str, Any]] | None = None) -> Prepare:
    async def prepare(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
        return query, (variables(m, obj) if variables else {})

    return prepare


def ns(m: Matrix, obj: str) -> str:
    return f"{m.tenant(obj).name}/sales"


def text_of(data: Any) -> str:
    return json.dumps(data)


# --- mutations that need a fresh object ------------------------------------------------


async def _batch(m: Matrix, obj: str, actor: str) -> str:
    """A running bulk operation of the system admin over one fresh instance of `obj`."""
    from stateward.runtime.batches import bulk

    pid = await m.fresh_instance(obj)
    batch = await bulk.create(m.api.runtime, m.api.admin.public, "action",
                              {"action": "note", "input": {"text": "x"}}, [pid])  # fmt: skip
    return node_id("BatchOperation", batch.id)


def _on_incident(query: str) -> Prepare:
    """A fresh open incident of the object's tenant for each try."""

    async def prepare(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
        return query, {"i": node_id("Incident", await m.fresh_incident(obj))}

    return prepare


async def _listing_incidents(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    if "incident" not in m.tenant(obj).extra:
        m.tenant(obj).extra["incident"] = await m.fresh_incident(obj)
    return "{incidents(first:100){edges{node{incidentId}}}}", {}


def _on_batch(query: str) -> Prepare:
    async def prepare(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
        return query, {"i": await _batch(m, obj, actor)}

    return prepare


async def _batch_done(m: Matrix, ident: str) -> None:
    from stateward.runtime.batches import bulk

    await bulk.process_running(m.api.runtime)


async def _perform(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    return ACT, {"i": await m.fresh_instance(obj), "a": "note", "in": {"text": actor}}


async def _advance(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    return "mutation($i:ID!){advance(instance:$i){event{seq}}}", {"i": await m.fresh_instance(obj)}


async def _cancel(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    return "mutation($i:ID!){cancelInstance(instance:$i){event{seq}}}", {
        "i": await m.fresh_instance(obj)
    }


async def _migrate(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    # a dry run: the refusal of a version that does not exist is part of the plan, so an
    # allowed caller gets data and the roles are all that is tested here
    query = """mutation($i:ID!){migrateInstance(instance:$i,toVersion:99,dryRun:true){
      plan{valid problems{code}}}}"""
    return query, {"i": await m.fresh_instance(obj)}


async def _entry(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    # entry tokens exist only for workflows with a public state: the tenant's public form
    started = await m.api.ok("mutation($w:String!){startInstance(workflow:$w){instanceId}}",
                             {"w": f"{ns(m, obj)}/form"})  # fmt: skip
    return "mutation($i:ID!){issueEntryToken(instance:$i)}", {
        "i": started["startInstance"]["instanceId"]
    }


def _assignment(mutation: str, claimed: bool, extra: str = "") -> Prepare:
    async def prepare(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
        aid = await m.fresh_assignment(obj, claim_by_member=claimed)
        return f"mutation($i:ID!){{{mutation}(id:$i{extra}){{status}}}}", {"i": aid}

    return prepare


async def _submit(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    body = m.envelope(obj, await m.fresh_instance(obj))
    query = """mutation($e:JSON!,$s:String!,$g:String!){submitEvent(event:$e,signature:$s,
      signer:$g){duplicate}}"""
    return query, {"e": body["event"], "s": body["signature"], "g": body["signer"]}


async def _submit_many(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    body = m.envelope(obj, await m.fresh_instance(obj))
    query = """mutation($e:[SignedEventInput!]!){submitEvents(events:$e){duplicate
      error{code}}}"""
    return query, {"e": [body]}


def _applied(data: dict[str, Any], m: Matrix, obj: str) -> bool:
    """submitEvents answers per item: a refused item carries its error, not the request."""
    return data["submitEvents"][0]["error"] is None


async def _add_workflow(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    definition = public_form(f"{ns(m, obj)}/n{uuid.uuid4().hex[:10]}")
    return "mutation($d:JSON!){addWorkflow(definition:$d){path}}", {"d": definition}


async def _update_workflow(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    definition = public_form(await m.fresh_workflow(obj))
    return "mutation($d:JSON!){updateWorkflow(definition:$d){version}}", {"d": definition}


async def _remove_workflow(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    return "mutation($p:String!){removeWorkflow(path:$p)}", {"p": await m.fresh_workflow(obj)}


async def _clone(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    target = f"{ns(m, obj)}/c{uuid.uuid4().hex[:10]}"
    query = "mutation($s:String!,$t:String!){cloneWorkflow(source:$s,target:$t){path}}"
    return query, {"s": m.tenant(obj).path, "t": target}


async def _import(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    package = {"format": "stateward.package/1",
               "workflows": [public_form(f"{ns(m, obj)}/i{uuid.uuid4().hex[:10]}")],
               "modules": []}  # fmt: skip
    return "mutation($p:JSON!){importPackage(package:$p){path}}", {"p": package}


def _module(mutation: str, fresh: bool) -> Prepare:
    async def prepare(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
        name = f"m{uuid.uuid4().hex[:10]}" if fresh else "scoring"
        query = (f"mutation($n:String!,$m:String!,$s:String!){{{mutation}(namespace:$n,"
                 "name:$m,source:$s){seq}}")  # fmt: skip
        return query, {"n": ns(m, obj), "m": name, "s": SCORING + f"# {actor}\n"}

    return prepare


def _role(mutation: str) -> Prepare:
    async def prepare(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
        query = (f"mutation($n:String!,$a:String!){{{mutation}(namespace:$n,actor:$a,"
                 'roles:["viewer"]){seq}}')  # fmt: skip
        return query, {"n": ns(m, obj), "a": fresh_key()}

    return prepare


def _grant(mutation: str, module: bool) -> Prepare:
    async def prepare(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
        name = ',name:"scoring"' if module else ""
        query = f'mutation($n:String!){{{mutation}(namespace:$n{name},to:"elsewhere/x"){{seq}}}}'
        return query, {"n": ns(m, obj)}

    return prepare


async def _token(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    target = m.tenant(obj).analyst[0].public
    return "mutation($a:String){createApiToken(actor:$a){label}}", {"a": target}


async def _login(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    key = generate_keypair()
    asked = await m.api.ok("mutation($k:String!){authChallenge(publicKey:$k){challenge}}",
                           {"k": key.public}, token=None)  # fmt: skip
    challenge = asked["authChallenge"]["challenge"]
    query = """mutation($k:String!,$c:String!,$s:String!){authLogin(publicKey:$k,
      challenge:$c,signature:$s){actor}}"""
    return query, {"k": key.public, "c": challenge, "s": key.sign(challenge.encode())}


async def _advance_public(m: Matrix, obj: str, actor: str) -> tuple[str, dict[str, Any]]:
    if obj == "acme":
        started = await m.api.ok('mutation{startPublic(workflow:"acme/sales/form"){token}}',
                                 token=None)  # fmt: skip
        token = started["startPublic"]["token"]
    else:
        token = "A" * 43  # well-formed, never issued
    return 'mutation($t:String!){advancePublic(token:$t,action:"note"){status}}', {"t": token}


def _spawning(m: Matrix, obj: str) -> dict[str, Any]:
    definition = public_form("acme/sales/probe")
    definition["actions"]["win"]["spawn"] = [{"workflow": m.tenant(obj).path}]
    return definition


def _validated(data: Any, m: Matrix, obj: str) -> bool:
    return bool(data["validateWorkflow"]["valid"])


# --- triggers of subscription rows -----------------------------------------------------


async def _note(m: Matrix, obj: str) -> None:
    await m.api.ok(ACT, {"i": m.tenant(obj).instance, "a": "note", "in": {"text": "t"}})


async def _assign(m: Matrix, obj: str) -> None:
    await m.fresh_assignment(obj)


EXPECTED: dict[str, Case] = {
    # ---------------------------------------------------------------- queries
    "node": Case(q("query($i:ID!){node(id:$i){id}}",
                   lambda m, o: {"i": node_id("Instance", m.tenant(o).instance)}), READ),
    "node:Registry": Case(q("query($i:ID!){node(id:$i){id}}",
                            lambda m, o: {"i": node_id("Registry", ns(m, o))}), READ),
    "node:Workflow": Case(q("query($i:ID!){node(id:$i){id}}",
                            lambda m, o: {"i": node_id("Workflow", m.tenant(o).path + "@1")}),
                          READ),
    "node:State": Case(q("query($i:ID!){node(id:$i){id}}",
                         lambda m, o: {"i": node_id("State", m.tenant(o).path + "@1#review")}),
                       READ),
    "node:Action": Case(q("query($i:ID!){node(id:$i){id}}",
                          lambda m, o: {"i": node_id("Action", m.tenant(o).path + "@1#win")}),
                        READ),
    "node:Event": Case(q("query($i:ID!){node(id:$i){id}}",
                         lambda m, o: {"i": node_id("Event", m.tenant(o).instance + ":1")}), READ),
    "node:Assignment": Case(q("query($i:ID!){node(id:$i){id}}",
                              lambda m, o: {"i": node_id("Assignment",
                                                         m.tenant(o).extra["assignment"])}),
                            READ),
    "node:Notification": Case(q("query($i:ID!){node(id:$i){id}}",
                                lambda m, o: {"i": node_id("Notification",
                                                           m.tenant(o).extra["notification"])}),
                              "NF/NF NF/NF ok/NF NF/ok NF/NF UA/UA UA/UA"),
    "viewer": Case(q("{viewer{id}}"), ANYONE),
    "net": Case(q("{net}"), ANYONE),
    "namespaces": Case(q("{namespaces}"), LISTED, lambda d, m, o: ns(m, o) in d["namespaces"]),
    "registry": Case(q("query($n:String!){registry(namespace:$n){seq}}",
                       lambda m, o: {"n": ns(m, o)}), READ),
    "workflow": Case(q("query($p:String!){workflow(path:$p){hash}}",
                       lambda m, o: {"p": m.tenant(o).path}), READ),
    "workflows": Case(q("{workflows(first:100){edges{node{path}}}}"), LISTED,
                      lambda d, m, o: m.tenant(o).path in text_of(d)),
    "instance": Case(q("query($i:ID!){instance(id:$i){data}}",
                       lambda m, o: {"i": m.tenant(o).instance}), READ),
    "instances": Case(q("{instances(first:100){edges{node{instanceId}}}}"), LISTED,
                      lambda d, m, o: m.tenant(o).instance in text_of(d)),
    "assignments": Case(q('{assignments(team:"analyst",first:100){edges{node{assignmentId}}}}'),
                        LISTED, lambda d, m, o: m.tenant(o).extra["assignment"] in text_of(d)),
    "myAssignments": Case(q("{myAssignments(first:100){edges{node{assignmentId}}}}"),
                          "--/-- --/-- ok/-- --/ok --/-- UA/UA UA/UA",
                          lambda d, m, o: m.tenant(o).extra["assignment"] in text_of(d)),
    "events": Case(q("query($i:ID!){events(process:$i){edges{node{seq}}}}",
                     lambda m, o: {"i": m.tenant(o).instance}), READ),
    "notifications": Case(q("{notifications(first:100){edges{node{notificationId}}}}"),
                          "--/-- --/-- ok/-- --/ok --/-- UA/UA UA/UA",
                          lambda d, m, o: f": {m.tenant(o).extra['notification']}"
                          in text_of(d)),
    "instanceCounts": Case(q("{instanceCounts(groupBy:[WORKFLOW]){workflow count}}"), LISTED,
                           lambda d, m, o: f'"{ns(m, o)}/' in text_of(d)),
    "assignmentCounts": Case(q("query($n:String!){assignmentCounts(groupBy:[STATUS],"
                               "filter:{namespace:$n}){count}}", lambda m, o: {"n": ns(m, o)}),
                             READ),
    "apiTokens": Case(q("{apiTokens{id}}"), SIGNED_IN),
    "revokeApiToken": Case(q("mutation{revokeApiToken(id:\"" + "ab" * 32 + "\"){id}}"),
                           "NF/NF NF/NF NF/NF NF/NF NF/NF UA/UA UA/UA"),
    "auditLog": Case(q("query($p:ID){auditLog(filter:{process:$p}){nodes{processId}}}",
                       lambda m, o: {"p": m.tenant(o).instance}), LISTED,
                     lambda d, m, o: m.tenant(o).instance in text_of(d)),
    "unreadCount": Case(q("{unreadCount}"), SIGNED_IN),
    "markNotificationsRead": Case(q("mutation($i:[ID!]!){markNotificationsRead(ids:$i)}",
                                    lambda m, o: {"i": [m.tenant(o).extra["notification"]]}),
                                  SIGNED_IN),
    "webhookDeliveries": Case(q("query($n:String!){webhookDeliveries(namespace:$n){edges{"
                                "cursor}}}", lambda m, o: {"n": ns(m, o)}),
                              "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    "publicEntry": Case(q("query($t:String!){publicEntry(token:$t){status}}",
                          lambda m, o: {"t": m.visitor_token if o == "acme" else "A" * 43}),
                        TOKEN),
    "verifyProcess": Case(q("query($i:ID!){verifyProcess(id:$i){valid}}",
                            lambda m, o: {"i": m.tenant(o).instance}), READ),
    "exportPackage": Case(q("query($n:String!){exportPackage(namespace:$n)}",
                            lambda m, o: {"n": ns(m, o)}), READ),
    "validateWorkflow": Case(q("query($d:JSON!){validateWorkflow(definition:$d){valid}}",
                               lambda m, o: {"d": _spawning(m, o)}),
                             "ok/ok ok/-- ok/-- --/ok --/-- ok/ok ok/ok", _validated),
    # The log's checkpoints and consistency proofs are roots over the whole log (no
    # instance data): any signed-in caller; an inclusion proof names an event: the read rule.
    "checkpoint": Case(q("{checkpoint{__typename}}"), SIGNED_IN),
    "checkpoints": Case(q("{checkpoints{edges{cursor}}}"), SIGNED_IN),
    "eventProof": Case(q("query($p:ID!){eventProof(process:$p,seq:1){__typename}}",
                         lambda m, o: {"p": m.tenant(o).instance}), READ),
    "consistencyProof": Case(q("{consistencyProof(from:1){__typename}}"), SIGNED_IN),
    # -------------------------------------------------------------- mutations
    "authChallenge": Case(q("mutation($k:String!){authChallenge(publicKey:$k){challenge}}",
                            lambda m, o: {"k": fresh_key()}), ANYONE),
    "authLogin": Case(_login, ANYONE),
    "createApiToken": Case(_token, "ok/ok FB/FB ok/FB FB/ok FB/FB UA/UA UA/UA"),
    "submitEvent": Case(_submit, "ok/ok ok/NF ok/NF NF/ok NF/NF ok/ok ok/ok"),
    "submitEvents": Case(_submit_many, "ok/ok ok/-- ok/-- --/ok --/-- ok/ok ok/ok",
                         seen=_applied),
    "addWorkflow": Case(_add_workflow, ADMIN),
    "updateWorkflow": Case(_update_workflow, ADMIN),
    "removeWorkflow": Case(_remove_workflow, ADMIN),
    "cloneWorkflow": Case(_clone, "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    "importPackage": Case(_import, ADMIN),
    "addModule": Case(_module("addModule", fresh=True), ADMIN),
    "updateModule": Case(_module("updateModule", fresh=False), ADMIN),
    "grantRole": Case(_role("grantRole"), ADMIN),
    "revokeRole": Case(_role("revokeRole"), ADMIN),
    "setWebhook": Case(q('mutation($n:String!){setWebhook(namespace:$n){seq}}',
                         lambda m, o: {"n": ns(m, o)}), ADMIN),
    "allowSpawn": Case(_grant("allowSpawn", module=False), ADMIN),
    "disallowSpawn": Case(_grant("disallowSpawn", module=False), ADMIN),
    "shareModule": Case(_grant("shareModule", module=True), ADMIN),
    "unshareModule": Case(_grant("unshareModule", module=True), ADMIN),
    # Any signed-in key rotates itself; only tried anonymously here (rotating a world
    # actor's key would retire it for every later row).
    "rotateKey": Case(q("mutation($k:String!){rotateKey(newKey:$k){duplicate}}",
                        lambda m, o: {"k": fresh_key()}), SIGNED_IN, only=("anonymous", "visitor")),
    "revokeKey": Case(q("mutation($k:String!){revokeKey(key:$k){duplicate}}",
                        lambda m, o: {"k": fresh_key()}),
                      "ok/ok FB/FB FB/FB FB/FB FB/FB UA/UA UA/UA"),
    "startInstance": Case(q("mutation($w:String!){startInstance(workflow:$w){instanceId}}",
                            lambda m, o: {"w": m.tenant(o).path}), READ),
    "performAction": Case(_perform, READ),
    "advance": Case(_advance, READ),
    "cancelInstance": Case(_cancel, "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    # operations (issue 15): admin or operator of the instance's namespace
    "migrateInstance": Case(_migrate, "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    "claimAssignment": Case(_assignment("claimAssignment", claimed=False), READ),
    "unclaimAssignment": Case(_assignment("unclaimAssignment", claimed=True), READ),
    "completeAssignment": Case(_assignment("completeAssignment", True, ',action:"win"'),
                               "FB/FB FB/NF ok/NF NF/ok NF/NF UA/UA UA/UA"),
    "cancelAssignment": Case(_assignment("cancelAssignment", claimed=False),
                             "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    "issueEntryToken": Case(_entry, "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    "startPublic": Case(q("mutation($w:String!){startPublic(workflow:$w){token}}",
                          lambda m, o: {"w": f"{ns(m, o)}/form"}), ANYONE),
    "advancePublic": Case(_advance_public, TOKEN),
    # Delegated stages (issue 13): the world has no delegated state, so the listing is empty
    # for every signed-in caller; an unknown task is NOT_FOUND; the callback token is the
    # only credential of completing (a forged one is NOT_FOUND for everyone). Tenant
    # isolation with real tasks: tests/api/test_graph_delegated.py.
    "delegatedTasks": Case(q("{delegatedTasks(first:5){nodes{id}}}"), SIGNED_IN),
    "lockDelegatedTask": Case(q("mutation($i:ID!){lockDelegatedTask(id:$i){token}}",
                                lambda m, o: {"i": str(uuid.uuid4())}),
                              "NF/NF NF/NF NF/NF NF/NF NF/NF UA/UA UA/UA"),
    "completeDelegatedTask": Case(q("mutation($t:String!){completeDelegatedTask(token:$t)"
                                    "{state}}", lambda m, o: {"t": "B" * 43}),
                                  "NF/NF NF/NF NF/NF NF/NF NF/NF NF/NF NF/NF"),
    # Issue 15 operations: admin or operator of the namespace (a reader's role: FORBIDDEN).
    # The bulk filters match nothing (no world instance is touched); a batch is visible to
    # its creator (here the system admin) only.
    "bulkCancel": Case(q('mutation($n:String!){bulkCancel(filter:{namespace:$n,state:"none"})'
                         "{total}}", lambda m, o: {"n": ns(m, o)}),
                       "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    "bulkAction": Case(q('mutation($n:String!){bulkAction(filter:{namespace:$n,state:"none"},'
                         'action:"note"){total}}', lambda m, o: {"n": ns(m, o)}),
                       "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    "bulkMigrate": Case(q('mutation($n:String!){bulkMigrate(filter:{namespace:$n,state:"none"},'
                          "toVersion:1){total}}", lambda m, o: {"n": ns(m, o)}),
                        "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    "batchOperation": Case(_on_batch("query($i:ID!){batchOperation(id:$i){total}}"),
                           "ok/ok NF/NF NF/NF NF/NF NF/NF UA/UA UA/UA"),
    "batchOperations": Case(q("{batchOperations{edges{node{id}}}}"), SIGNED_IN),
    "bulkRetry": Case(q('mutation($n:String!){bulkRetry(filter:{namespace:$n,state:"none"})'
                        "{total}}", lambda m, o: {"n": ns(m, o)}),
                      "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    # Incidents: admin or operator of the namespace; other tenants' incidents do not exist.
    "incidents": Case(_listing_incidents, "ok/ok ok/-- --/-- --/-- --/-- UA/UA UA/UA",
                      lambda d, m, o: m.tenant(o).extra["incident"] in text_of(d)),
    "retryIncident": Case(_on_incident("mutation($i:ID!){retryIncident(id:$i)"
                                       "{incident{attempts}}}"),
                          "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    "resolveIncident": Case(_on_incident('mutation($i:ID!){resolveIncident(id:$i,action:"$cancel")'
                                         "{incident{resolved}}}"),
                            "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    "node:Incident": Case(_on_incident("query($i:ID!){node(id:$i){id}}"),
                          "ok/ok ok/NF NF/NF NF/NF NF/NF UA/UA UA/UA"),
    "cancelBatchOperation": Case(_on_batch("mutation($i:ID!){cancelBatchOperation(id:$i)"
                                           "{status}}"),
                                 "ok/ok NF/NF NF/NF NF/NF NF/NF UA/UA UA/UA"),
    "publishMessage": Case(q('mutation($n:String!){publishMessage(namespace:$n,name:"m",'
                             'correlationKey:"k"){messageId}}', lambda m, o: {"n": ns(m, o)}),
                           "ok/ok ok/NF FB/NF NF/FB NF/NF UA/UA UA/UA"),
    # ---------------------------------------------------------- subscriptions
    "events@sub": Case(q("subscription($n:String!){events(filter:{namespace:$n}){type}}",
                         lambda m, o: {"n": ns(m, o)}), READ, trigger=_note),
    "instanceUpdated": Case(q("subscription($i:ID!){instanceUpdated(id:$i){seq}}",
                              lambda m, o: {"i": m.tenant(o).instance}), READ, trigger=_note),
    "batchOperation@sub": Case(_on_batch("subscription($i:ID!){batchOperation(id:$i){status}}"),
                               "ok/ok NF/NF NF/NF NF/NF NF/NF UA/UA UA/UA", trigger=_batch_done),
    "assignmentQueue": Case(q('subscription{assignmentQueue(team:"analyst"){type namespace}}'),
                            "ok/ok ok/-- ok/-- --/ok FB/FB UA/UA UA/UA", trigger=_assign),
}  # fmt: skip


def _expected(field: str, actor: str, obj: str) -> str:
    pair = EXPECTED[field].expected.split()[ACTORS.index(actor)]
    return pair.split("/")[0 if obj == "acme" else 1]


def _answer(body: dict[str, Any], case: Case, m: Matrix, obj: str) -> str:
    errors = body.get("errors")
    if errors:
        code = errors[0].get("extensions", {}).get("code")
        return CODES.get(code, str(code))
    if case.seen is not None:
        return "ok" if case.seen(body["data"], m, obj) else "--"
    return "ok"


async def _subscribe(m: Matrix, case: Case, query: str, variables: dict, token: str | None,
                     obj: str) -> str:  # fmt: skip
    conn = await websockets.connect(m.ws_url, subprotocols=["graphql-transport-ws"])
    try:
        payload = {"authorization": f"Bearer {token}"} if token else {}
        await conn.send(json.dumps({"type": "connection_init", "payload": payload}))
        assert json.loads(await conn.recv())["type"] == "connection_ack"
        before = len(m.api.services.bus.fanout)
        message = {"id": "1", "type": "subscribe",
                   "payload": {"query": query, "variables": variables}}  # fmt: skip
        await conn.send(json.dumps(message))
        for _ in range(200):  # subscribed (or already refused)
            if len(m.api.services.bus.fanout) > before:
                break
            try:
                early = json.loads(await asyncio.wait_for(conn.recv(), 0.01))
            except TimeoutError:
                continue
            return _answer(early["payload"] if early["type"] == "next" else
                           {"errors": early["payload"]}, case, m, obj)  # fmt: skip
        assert case.trigger is not None
        await case.trigger(m, obj)
        try:
            reply = json.loads(await asyncio.wait_for(conn.recv(), 1.0))
        except TimeoutError:
            return "--"
        body = reply["payload"] if reply["type"] == "next" else {"errors": reply["payload"]}
        return _answer(body, case, m, obj)
    finally:
        await conn.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def matrix(module_db_url: str) -> AsyncIterator[Matrix]:
    stack, close = await open_stack(module_db_url)
    try:
        m = await build(stack)
        async for url in serve(stack):
            m.ws_url = url
            yield m
    finally:
        await close()


def _fields() -> list[str]:
    """Query, Mutation and Subscription fields, by introspection of the real schema."""
    from stateward.schema.root import create_schema
    from stateward.settings import Settings

    schema = create_schema(Settings())._schema
    names = [*schema.query_type.fields, *schema.mutation_type.fields]  # type: ignore[union-attr]
    subscriptions = schema.subscription_type.fields  # type: ignore[union-attr]
    return names + [f"{n}@sub" if n in names else n for n in subscriptions]


def test_every_operation_has_a_row() -> None:
    missing = sorted(set(_fields()) - EXPECTED.keys())
    assert not missing, f"operations without a row in EXPECTED: {missing}"
    stale = sorted({k.split(":")[0] for k in EXPECTED} - set(_fields()))
    assert not stale, f"rows for operations that no longer exist: {stale}"


@pytest.mark.parametrize("field", sorted(EXPECTED))
async def test_matrix(matrix: Matrix, field: str) -> None:
    case = EXPECTED[field]
    got: dict[tuple[str, str], str] = {}
    for actor in case.only:
        for obj in ("acme", "globex"):
            query, variables = await case.prepare(matrix, obj, actor)
            token = matrix.tokens[actor]
            if case.trigger is not None:
                got[actor, obj] = await _subscribe(matrix, case, query, variables, token, obj)
            else:
                body = await matrix.api.gql(query, variables, token=token)
                got[actor, obj] = _answer(body, case, matrix, obj)
    wrong = {
        f"{actor}/{obj}": f"got {answer}, want {_expected(field, actor, obj)}"
        for (actor, obj), answer in got.items()
        if answer != _expected(field, actor, obj)
    }
    row = " ".join(f"{got[a, 'acme']}/{got[a, 'globex']}" for a in case.only)
    assert not wrong, (row, wrong)
