"""The world of the authorization matrix (tests/api/test_authorization_matrix.py).

Built once per database: the tenants `acme` and `globex` of `tenant_world` (each with
`<t>/sales/lead`, an admin at `<t>`, an analyst at `<t>/sales`, an instance), plus per
tenant a public-entry workflow, a hook module, a team notification, an assignment its
analyst claimed, and a visitor token of acme. `fresh_*` helpers make a new object per
call (as the system admin), so a mutation tried by one actor never changes what the
next one finds.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from typing import Any

from graph_stack import Api
from tenant_world import ACT, DEPLOY, START, Tenant, lead, world

from stateward.governance.keys import KeyPair, generate_keypair
from stateward.runtime.core.commands import sign_as
from stateward.runtime.core.ops_support import system_act

SCORING = "def score(ctx):\n    return {'score': 1}\n"
ASSIGNMENTS = "query($i:ID!){instance(id:$i){assignments{edges{node{assignmentId}}}}}"
CLAIM = "mutation($i:ID!){claimAssignment(id:$i){status}}"
#: Actor classes, in the order of the expectation strings.
ACTORS = ("system", "tenant_admin", "member", "other_member", "no_grant", "anonymous", "visitor")


def node_id(kind: str, local: str) -> str:
    """A Relay global id."""
    return base64.b64encode(f"{kind}:{local}".encode()).decode()


def public_form(path: str) -> dict[str, Any]:
    """A workflow whose initial state is public (visitors start it with startPublic)."""
    definition = lead(path)
    definition["states"]["intake"]["audience"] = "public"
    return definition


@dataclass
class Matrix:
    """The shared world: the stack, both tenants, tokens by actor class."""

    api: Api
    acme: Tenant
    globex: Tenant
    tokens: dict[str, str | None]
    keys: dict[str, KeyPair | None]
    visitor_token: str
    ws_url: str = ""

    def tenant(self, obj: str) -> Tenant:
        return self.acme if obj == "acme" else self.globex

    async def fresh_instance(self, obj: str, submit: bool = False) -> str:
        t = self.tenant(obj)
        started = await self.api.ok(START, {"w": t.path})
        pid: str = started["startInstance"]["instanceId"]
        if submit:
            await self.api.ok(ACT, {"i": pid, "a": "submit"})
        return pid

    async def fresh_assignment(self, obj: str, claim_by_member: bool = False) -> str:
        pid = await self.fresh_instance(obj, submit=True)
        rows = await self.api.ok(ASSIGNMENTS, {"i": pid})
        aid: str = rows["instance"]["assignments"]["edges"][0]["node"]["assignmentId"]
        if claim_by_member:
            await self.api.ok(CLAIM, {"i": aid}, token=self.tenant(obj).analyst[1])
        return aid

    async def fresh_workflow(self, obj: str) -> str:
        path = f"{obj}/sales/w{uuid.uuid4().hex[:10]}"
        await self.api.ok(DEPLOY, {"d": lead(path)})
        return path

    async def fresh_incident(self, obj: str) -> str:
        """A new incident of the object tenant: an instance of `<t>/sales/checked` in
        `error` by a recorded failing `$automate` (no hook runs in this stack)."""
        t = self.tenant(obj)
        path = f"{t.name}/sales/checked"
        if "checked" not in t.extra:
            await self.api.ok(DEPLOY, {"d": checked(path)})
            t.extra["checked"] = path
        started = await self.api.ok(START, {"w": path})
        pid: str = started["startInstance"]["instanceId"]
        await self.api.ok(ACT, {"i": pid, "a": "submit"})
        rt = self.api.runtime
        input = {"hook": "scoring:score", "after": 2, "error": "HOOK_FAILED: boom",
                 "code": "HOOK_FAILED"}  # fmt: skip
        await system_act(rt, pid, path, "$automate", input)
        async with rt.uow(readonly=True) as uow:
            incident = await uow.incidents.open_for(pid)
        assert incident is not None
        return incident.id

    def envelope(self, obj: str, pid: str) -> dict[str, Any]:
        """A `note` on `pid` signed by the object tenant's analyst (a client-signed event)."""
        key = self.tenant(obj).analyst[0]
        signed = sign_as(self.api.runtime, key, pid, "note", self.tenant(obj).path, {"text": "x"})
        return signed.to_json()


async def build(api: Api) -> Matrix:
    """Everything the matrix reads, made once."""
    w = await world(api)
    for t in (w.acme, w.globex):
        await api.ok(DEPLOY, {"d": public_form(f"{t.name}/sales/form")})
        add = (
            'mutation($n:String!,$s:String!){addModule(namespace:$n,name:"scoring",source:$s){seq}}'
        )
        await api.ok(add, {"n": f"{t.name}/sales", "s": SCORING})
        async with api.runtime.uow() as uow:
            note = await uow.notifications.add(
                "team:analyst", f"{t.name}/sales", "workflow.sla.breached", {},
                api.runtime.clock.now(), process_id=t.instance,
            )  # fmt: skip
            await uow.commit()
        t.extra["notification"] = str(note.id)
        await api.ok(ACT, {"i": t.instance, "a": "note", "in": {"text": "x"}})
        submitted = await api.ok(START, {"w": t.path})
        pid = submitted["startInstance"]["instanceId"]
        await api.ok(ACT, {"i": pid, "a": "submit"})
        rows = await api.ok(ASSIGNMENTS, {"i": pid})
        aid = rows["instance"]["assignments"]["edges"][0]["node"]["assignmentId"]
        await api.ok(CLAIM, {"i": aid}, token=t.analyst[1])
        t.extra["assignment"] = aid
    started = await api.ok(
        'mutation{startPublic(workflow:"acme/sales/form",data:{}){token}}', token=None
    )
    tokens: dict[str, str | None] = {
        "system": api.admin_token, "tenant_admin": w.acme.admin[1], "member": w.acme.analyst[1],
        "other_member": w.globex.analyst[1], "no_grant": w.nogrant[1], "anonymous": None,
        "visitor": None,
    }  # fmt: skip
    keys: dict[str, KeyPair | None] = {
        "system": api.admin, "tenant_admin": w.acme.admin[0], "member": w.acme.analyst[0],
        "other_member": w.globex.analyst[0], "no_grant": w.nogrant[0], "anonymous": None,
        "visitor": None,
    }  # fmt: skip
    return Matrix(api, w.acme, w.globex, tokens, keys, started["startPublic"]["token"])


def checked(path: str) -> dict[str, Any]:
    """A workflow whose `checking` state runs the tenant's `scoring:score` hook."""
    return {
        "$version": "2.0",
        "$path": path,
        "initial": "intake",
        "states": {
            "intake": {"label": "Intake"},
            "checking": {"label": "Checking", "audience": "system", "hook": "scoring:score"},
            "done": {"label": "Done", "terminal": True},
        },
        "actions": {
            "submit": {"from": "intake", "to": "checking"},
            "pass": {"from": "checking", "to": "done"},
        },
    }


def fresh_key() -> str:
    """A new actor key (public part)."""
    return generate_keypair().public
