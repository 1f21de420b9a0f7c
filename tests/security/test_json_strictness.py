"""Attack family: JSON strictness. Duplicate keys, deep nesting and unsafe numbers in HTTP
bodies, GET variables and websocket frames are refused with stable codes (issue 9 items 3
and 4; DESIGN §2.2/§6: duplicate keys are detected on the raw text).

Before: the body went through `json.loads` (last key wins), so `addWorkflow` deployed a
definition whose `review` state was written twice and `validateWorkflow` called it valid;
1,000 nested `[` were a plain-text HTTP 500 and dropped the websocket with 1006.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import websockets
from graph_stack import Api, loan

ADD = "mutation($d:JSON!){addWorkflow(definition:$d){path version}}"
VALIDATE = "query($d:JSON!){validateWorkflow(definition:$d){valid}}"
START = 'mutation{startInstance(workflow:"acme/loans/loan"){instanceId}}'
PERFORM = (
    'mutation($i:ID!,$in:JSON){performAction(instance:$i,action:"submit",input:$in){duplicate}}'
)


def with_duplicate_state(path: str = "acme/loans/loan") -> str:
    """The loan definition as JSON text with its `review` state written twice."""
    text = json.dumps(loan(path))
    return text.replace('"review": {', '"review": {"label": "Shadow"}, "review": {', 1)


async def post_raw(api: Api, text: str, token: str | None = "admin") -> httpx.Response:
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {api.admin_token if token == 'admin' else token}"
    return await api.client.post("/graphql", content=text, headers=headers)


def body(query: str, variables_json: str) -> str:
    """A request body as raw text (json.dumps could not write a duplicate key)."""
    return '{"query": ' + json.dumps(query) + ', "variables": ' + variables_json + "}"


def one(name: str, value_json: str) -> str:
    """`{"<name>": <value_json>}` as raw text."""
    return '{"' + name + '": ' + value_json + "}"


async def test_add_workflow_with_a_duplicated_state_is_refused_and_nothing_is_deployed(api: Api):
    response = await post_raw(api, body(ADD, one("d", with_duplicate_state())))
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["extensions"] == {"code": "DUPLICATE_KEY", "pointer": "/states/review"}
    assert "'review'" in error["message"]
    listed = await api.ok("{ workflows { edges { node { path } } } }")
    paths = [edge["node"]["path"] for edge in listed["workflows"]["edges"]]
    assert "acme/loans/loan" not in paths


async def test_validate_workflow_does_not_call_a_duplicated_state_valid(api: Api):
    query = "query($def:JSON!){validateWorkflow(definition:\n  $def){valid}}"
    response = await post_raw(api, body(query, one("def", with_duplicate_state())))
    assert response.status_code == 400
    assert response.json()["errors"][0]["extensions"]["code"] == "DUPLICATE_KEY"


async def test_a_duplicate_key_in_an_action_input_is_invalid_input(api: Api):
    await api.ok(ADD, {"d": loan()})
    instance = (await api.ok(START))["startInstance"]["instanceId"]
    variables = '{"i": "' + instance + '", "in": {"fields": {"amount": 5, "amount": 5000}}}'
    response = await post_raw(api, body(PERFORM, variables))
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["extensions"] == {
        "code": "INVALID_INPUT",
        "pointer": "/variables/in/fields/amount",
    }
    events = await api.ok("query($i:ID!){events(process:$i){edges{node{seq}}}}", {"i": instance})
    assert len(events["events"]["edges"]) == 1  # only the start: nothing was performed


async def test_a_duplicate_key_in_a_submitted_envelope_is_invalid_input(api: Api):
    query = 'mutation($e:JSON!){submitEvent(event:$e,signature:"x",signer:"y"){duplicate}}'
    variables = '{"e": {"type": "x", "nonce": "a", "nonce": "b"}}'
    response = await post_raw(api, body(query, variables), token=None)
    assert response.status_code == 400
    assert response.json()["errors"][0]["extensions"]["code"] == "INVALID_INPUT"


async def test_duplicate_top_level_keys_are_refused(api: Api):
    response = await post_raw(api, '{"query": "{ net }", "query": "{ __typename }"}')
    assert response.status_code == 400
    assert response.json()["errors"][0]["extensions"] == {
        "code": "INVALID_INPUT",
        "pointer": "/query",
    }


async def test_duplicate_keys_in_get_variables_are_refused(api: Api):
    params = {"query": "query($x:JSON){ net }", "variables": '{"x": 1, "x": 2}'}
    response = await api.client.get("/graphql", params=params)
    assert response.status_code == 400
    assert response.json()["errors"][0]["extensions"]["code"] == "INVALID_INPUT"


async def test_deeply_nested_json_is_a_client_error(api: Api):
    deep = "[" * 1000 + "]" * 1000
    response = await post_raw(api, body("{ net }", one("x", deep)))
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "INVALID_JSON"
    assert "nested deeper than 64" in error["message"]


async def test_nesting_up_to_the_limit_is_accepted(api: Api):
    nested = "[" * 60 + "]" * 60  # not a definition, but well-formed JSON within the limit
    response = await post_raw(api, body(VALIDATE, one("d", nested)))
    assert response.status_code == 200
    assert response.json()["data"]["validateWorkflow"]["valid"] is False


async def test_a_huge_integer_in_the_body_is_a_client_error(api: Api):
    response = await post_raw(api, body(VALIDATE, one("d", "9" * 5000)))
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "INVALID_JSON"
    assert len(error["message"]) < 250


async def _frames_after(ws_url: str, frames: list[str]) -> Any:
    async with websockets.connect(ws_url, subprotocols=["graphql-transport-ws"]) as ws:
        for frame in frames:
            await ws.send(frame)
        try:
            while True:
                await ws.recv()
        except websockets.ConnectionClosed as closed:
            return closed.rcvd


async def test_a_websocket_frame_with_a_duplicate_key_closes_with_4400(api: Api, ws_url: str):
    frame = '{"type": "connection_init", "payload": {}, "type": "ping"}'
    close = await _frames_after(ws_url, [frame])
    assert close.code == 4400
    assert close.reason.startswith("INVALID_INPUT")


async def test_a_deeply_nested_websocket_frame_closes_with_4400(api: Api, ws_url: str):
    init = json.dumps({"type": "connection_init", "payload": {}})
    deep = "[" * 1000 + "]" * 1000
    frame = (
        '{"id": "1", "type": "subscribe", "payload": {"query": "{ net }", "variables": {"x": %s}}}'
    )
    close = await _frames_after(ws_url, [init, frame % deep])
    assert close.code == 4400
    assert close.reason.startswith("INVALID_JSON")
