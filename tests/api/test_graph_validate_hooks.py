"""`validateWorkflow` agrees with deployment about hook modules (issue 13), and neither tells
whether a module exists in a namespace the caller may not read."""

from __future__ import annotations

import json
from typing import Any

from graph_stack import Api
from tenant_world import DEPLOY, world

VALIDATE = """query($d:JSON!){validateWorkflow(definition:$d){valid
  errors{code pointer message}}}"""
ADD_MODULE = (
    'mutation($n:String!,$s:String!){addModule(namespace:$n,name:"scoring",source:$s){seq}}'
)
SCORING = "def score(ctx):\n    return {'score': 7}\n"


def automated(path: str, hook: str) -> dict[str, Any]:
    return {
        "$version": "2.0",
        "$path": path,
        "initial": "intake",
        "states": {
            "intake": {"label": "Intake"},
            "scoring": {"label": "Scoring", "audience": "system", "hook": hook},
            "done": {"label": "Done", "terminal": True},
        },
        "actions": {
            "go": {"from": "intake", "to": "scoring"},
            "finish": {"from": "scoring", "to": "done"},
        },
    }


def problems_of(body: dict[str, Any]) -> list[dict[str, str]]:
    """The problems of a refused addWorkflow, as validateWorkflow lists errors."""
    found = body["errors"][0]["extensions"]["problems"]
    return [{"code": p["code"], "pointer": p["pointer"], "message": p["message"]} for p in found]


async def test_a_hook_on_an_undeployed_module_is_reported_alike(api: Api) -> None:
    w = await world(api)
    token = w.acme.admin[1]
    missing = automated("acme/sales/auto", "scoring:score")
    checked = (await api.ok(VALIDATE, {"d": missing}, token=token))["validateWorkflow"]
    refused = await api.gql(DEPLOY, {"d": missing}, token=token)
    assert checked["valid"] is False
    assert checked["errors"] == problems_of(refused)
    assert checked["errors"][0]["code"] == "UNRESOLVED_HOOK"
    assert checked["errors"][0]["pointer"] == "/states/scoring/hook"
    await api.ok(ADD_MODULE, {"n": "acme/sales", "s": SCORING}, token=token)
    assert (await api.ok(VALIDATE, {"d": missing}, token=token))["validateWorkflow"] == {
        "valid": True, "errors": [],
    }  # fmt: skip
    await api.ok(DEPLOY, {"d": missing}, token=token)


async def test_neither_tells_whether_a_foreign_module_exists(api: Api) -> None:
    w = await world(api)
    await api.ok(ADD_MODULE, {"n": "acme/sales", "s": SCORING}, token=w.acme.admin[1])
    gx = w.globex.admin[1]
    exists = automated("globex/sales/auto", "acme/sales/scoring:score")
    absent = automated("globex/sales/auto", "acme/sales/nothing:score")

    def masked(body: Any) -> str:
        return (
            json.dumps(body)
            .replace("acme/sales/scoring", "<m>")
            .replace("acme/sales/nothing", "<m>")
        )

    seen_exists = await api.ok(VALIDATE, {"d": exists}, token=gx)
    seen_absent = await api.ok(VALIDATE, {"d": absent}, token=gx)
    assert masked(seen_exists) == masked(seen_absent)
    assert seen_exists["validateWorkflow"]["errors"][0]["code"] == "UNRESOLVED_HOOK"
    refused = await api.gql(DEPLOY, {"d": exists}, token=gx)
    assert seen_exists["validateWorkflow"]["errors"] == problems_of(refused)
    # a key with no role at all, validating a definition of a namespace it cannot read
    _, stranger = w.nogrant
    own_exists = automated("acme/sales/probe", "scoring:score")
    own_absent = automated("acme/sales/probe", "nothing:score")
    a = await api.ok(VALIDATE, {"d": own_exists}, token=stranger)
    b = await api.ok(VALIDATE, {"d": own_absent}, token=stranger)
    assert masked(a).replace("scoring:", "<m>:") == masked(b).replace("nothing:", "<m>:")
    assert a["validateWorkflow"]["errors"][0]["code"] == "UNRESOLVED_HOOK"
