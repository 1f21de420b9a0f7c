"""The visitor's side of a mixed team/public flow (seed §15), as an attacker holding only an
entry token: a frozen view in team states, never an internal state's key or label anywhere
in its responses, and `startPublic` data limited to the public form's fields."""

from __future__ import annotations

import json
from typing import Any

from graph_stack import Api, loan

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){publicEntry publicStart}}"
SECRETS = ("fraud_check", "Fraud desk", "archive_internal", "Shredder archive")
MIXED: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/web/claim",
    "initial": "intake",
    "states": {
        "intake": {"label": "Your claim", "audience": "public", "visible": ["name"],
                   "form": {"fields": {"name": {"type": "string", "required": True},
                                       "amount": {"type": "number"}}}},
        "fraud_check": {"label": "Fraud desk", "assign": "analyst", "visible": ["name"]},
        "confirm": {"label": "Confirmation", "audience": "public", "visible": ["name"]},
        "archive_internal": {"label": "Shredder archive", "terminal": True},
    },
    "actions": {
        "send": {"role": "public", "from": "intake", "to": "fraud_check",
                 "mutate": {"$set": {"name": "input.fields.name"}}},
        "approve": {"role": "analyst,admin", "from": "fraud_check", "to": "confirm"},
        "ack": {"role": "public", "from": "confirm", "to": "archive_internal"},
    },
}  # fmt: skip
VIEW = "state{key label ordinal total} form data status active branding"
START = (
    f'mutation($d:JSON){{startPublic(workflow:"acme/web/claim",data:$d){{token view{{{VIEW}}}}}}}'
)
SEE = f"query($t:String!){{publicEntry(token:$t){{{VIEW}}}}}"
ACT = (
    "mutation($t:String!,$a:String,$in:JSON)"
    f"{{advancePublic(token:$t,action:$a,input:$in){{{VIEW}}}}}"
)


async def test_the_visitor_never_reads_an_internal_state(api: Api) -> None:
    assert (await api.ok(DEPLOY, {"d": MIXED}))["addWorkflow"] == {
        "publicEntry": True, "publicStart": True,
    }  # fmt: skip
    seen: list[Any] = []

    async def visitor(query: str, variables: dict[str, Any]) -> dict[str, Any]:
        body = await api.gql(query, variables, token=None)
        seen.append(body)
        return body

    started = await visitor(START, {"d": {"name": "Eve"}})
    token = started["data"]["startPublic"]["token"]
    sent = await visitor(ACT, {"t": token, "a": "send", "in": {"fields": {"name": "Eve"}}})
    frozen = sent["data"]["advancePublic"]
    assert frozen["state"] == {"key": "intake", "label": "Your claim", "ordinal": 0, "total": 4}
    assert (frozen["status"], frozen["active"], frozen["data"], frozen["form"]) == (
        "PROCESSING", False, {}, None,
    )  # fmt: skip
    # probing while frozen: every answer is an error that names no internal state
    for action, input in [("approve", {}), (None, {}), ("ack", {}), ("send", {}),
                          ("fraud_check", {}), ("$cancel", {})]:  # fmt: skip
        body = await visitor(ACT, {"t": token, "a": action, "in": input})
        assert body.get("errors"), body
    assert (await visitor(SEE, {"t": token}))["data"]["publicEntry"]["status"] == "PROCESSING"

    pid = await _instance_of(api)
    await api.ok('mutation($i:ID!){performAction(instance:$i,action:"approve"){duplicate}}',
                 {"i": pid})  # fmt: skip
    confirm = (await visitor(SEE, {"t": token}))["data"]["publicEntry"]
    assert (confirm["state"]["key"], confirm["active"], confirm["data"]) == (
        "confirm", True, {"name": "Eve"},
    )  # fmt: skip
    early = await visitor(ACT, {"t": token, "a": "approve", "in": {}})
    assert early.get("errors")
    done = (await visitor(ACT, {"t": token, "a": "ack", "in": {}}))["data"]["advancePublic"]
    assert (done["state"]["key"], done["status"], done["active"]) == ("confirm", "COMPLETED", False)
    late = await visitor(ACT, {"t": token, "a": "ack", "in": {}})
    assert late["errors"][0]["extensions"]["code"] == "INACTIVE_PROCESS"

    text = json.dumps(seen)
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked to the visitor: {text}"


async def _instance_of(api: Api) -> str:
    rows = await api.ok('{workflow(path:"acme/web/claim"){instances{edges{node{instanceId}}}}}')
    return str(rows["workflow"]["instances"]["edges"][0]["node"]["instanceId"])


async def test_start_public_accepts_only_the_public_forms_fields(api: Api) -> None:
    await api.ok(DEPLOY, {"d": MIXED})
    for data, pointer in [
        ({"name": "Eve", "approved": True}, "/data/approved"),
        ({"state": "confirm"}, "/data/state"),
        ({"amount": "lots"}, "/data/amount"),
        ([1], "/data"),
    ]:
        body = await api.gql(START, {"d": data}, token=None)
        ext = body["errors"][0]["extensions"]
        assert (ext["code"], ext["pointer"]) == ("INVALID_INPUT", pointer), body
    ok = await api.gql(START, {"d": {"name": "Eve", "amount": 12}}, token=None)
    assert ok["data"]["startPublic"]["view"]["data"] == {"name": "Eve"}


async def test_entry_eligibility_is_any_public_state(api: Api) -> None:
    later = json.loads(json.dumps(MIXED))
    later["$path"] = "acme/web/later"
    later["initial"] = "fraud_check"
    flags = (await api.ok(DEPLOY, {"d": later}))["addWorkflow"]
    assert flags == {"publicEntry": True, "publicStart": False}
    assert (await api.ok(DEPLOY, {"d": loan()}))["addWorkflow"] == {
        "publicEntry": False, "publicStart": False,
    }  # fmt: skip
    # a team-initial workflow issues entry tokens; a loan (no public state) does not
    started = await api.ok('mutation{startInstance(workflow:"acme/web/later"){instanceId}}')
    issue = "mutation($i:ID!){issueEntryToken(instance:$i)}"
    token = await api.ok(issue, {"i": started["startInstance"]["instanceId"]})
    view = (await api.ok(SEE, {"t": token["issueEntryToken"]}, token=None))["publicEntry"]
    assert (view["state"]["key"], view["status"]) == ("intake", "PROCESSING")
    assert "fraud" not in json.dumps(view).lower()
    plain = await api.ok('mutation{startInstance(workflow:"acme/loans/loan"){instanceId}}')
    body = await api.gql(issue, {"i": plain["startInstance"]["instanceId"]})
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    # a visitor cannot start a workflow whose initial state is not public
    refused = await api.gql(START.replace("acme/web/claim", "acme/web/later"), {"d": {}},
                            token=None)  # fmt: skip
    assert refused["errors"][0]["extensions"]["code"] == "NOT_FOUND"
