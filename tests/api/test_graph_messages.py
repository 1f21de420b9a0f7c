"""`publishMessage` and `POST /messages/{name}` (issue 15) through the real app: delivery
to the waiting instance, idempotency, input errors with pointers, and who may publish
(anonymous, a key with no role, a reader without the operator role, another tenant)."""

from __future__ import annotations

from typing import Any

from graph_stack import Api
from test_graph_operations import code

ORDER: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/shop/order",
    "initial": "awaiting_payment",
    "correlation": {"paid": "data.orderId"},
    "states": {
        "awaiting_payment": {"label": "Awaiting payment"},
        "paid": {"label": "Paid", "terminal": True},
    },
    "actions": {
        "payment": {"label": "Payment", "from": "awaiting_payment", "to": "paid",
                    "message": "paid", "mutate": {"$set": {"amount": "input.amount"}}},
    },
}  # fmt: skip
DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
START = """mutation($d:JSON!){startInstance(workflow:"acme/shop/order",data:$d){instanceId}}"""
PUBLISH = """mutation($n:String!,$k:String!,$p:JSON,$t:Int!,$m:String){publishMessage(
  namespace:$n,name:"paid",correlationKey:$k,payload:$p,ttlSeconds:$t,messageId:$m){
  messageId name namespace correlationKey duplicate expiresAt
  delivered{instanceId state{key} data} started{instanceId}}}"""
INSTANCE = """query($i:ID!){node(id:$i){... on Instance{state}}}"""


async def _setup(api: Api) -> str:
    await api.ok(DEPLOY, {"d": ORDER})
    return str((await api.ok(START, {"d": {"orderId": "o-1"}}))["startInstance"]["instanceId"])


def _vars(key: str = "o-1", **kw: Any) -> dict[str, Any]:
    return {"n": "acme/shop", "k": key, "p": {"amount": 5}, "t": 0, "m": None} | kw


async def test_publish_message_performs_the_action_on_the_waiting_instance(api: Api) -> None:
    pid = await _setup(api)
    done = (await api.ok(PUBLISH, _vars(m="pay-1", t=60)))["publishMessage"]
    assert done["messageId"] == "pay-1" and done["duplicate"] is False
    delivered = done["delivered"]
    assert [(d["instanceId"], d["state"]["key"], d["data"]["amount"]) for d in delivered] == [
        (pid, "paid", 5)
    ]
    again = (await api.ok(PUBLISH, _vars(m="pay-1", t=60)))["publishMessage"]
    assert again["duplicate"] is True and again["delivered"][0]["instanceId"] == pid
    assert code(await api.gql(PUBLISH, _vars(m="pay-1", t=60, p={"amount": 6}))) == "REPLAYED"


async def test_a_message_nobody_waits_for_reaches_no_one(api: Api) -> None:
    await _setup(api)
    done = (await api.ok(PUBLISH, _vars(key="other")))["publishMessage"]
    assert done["delivered"] == [] and done["started"] == []


async def test_bad_input_is_refused_with_its_pointer(api: Api) -> None:
    await _setup(api)
    body = await api.gql(PUBLISH, _vars(t=-5))
    assert code(body) == "INVALID_INPUT"
    assert body["errors"][0]["extensions"]["pointer"] == "/ttlSeconds"
    body = await api.gql(PUBLISH, _vars(p=[1, 2]))
    assert body["errors"][0]["extensions"]["pointer"] == "/payload"


async def test_who_may_publish(api: Api) -> None:
    await _setup(api)
    assert code(await api.gql(PUBLISH, _vars(), token=None)) == "UNAUTHENTICATED"
    _, nobody = await api.user()
    assert code(await api.gql(PUBLISH, _vars(), token=nobody)) == "NOT_FOUND"
    _, reader = await api.user("acme/shop", "clerk")
    assert code(await api.gql(PUBLISH, _vars(), token=reader)) == "FORBIDDEN"
    _, tenant = await api.user("globex", "admin")
    assert code(await api.gql(PUBLISH, _vars(), token=tenant)) == "NOT_FOUND"
    _, operator = await api.user("acme/shop", "operator")
    done = (await api.ok(PUBLISH, _vars(), token=operator))["publishMessage"]
    assert len(done["delivered"]) == 1


async def test_post_messages_endpoint_publishes_with_the_same_rules(api: Api) -> None:
    pid = await _setup(api)
    url = "/messages/paid"
    body = {"namespace": "acme/shop", "correlationKey": "o-1", "payload": {"amount": 9},
            "messageId": "http-1"}  # fmt: skip
    anonymous = await api.client.post(url, json=body)
    assert anonymous.status_code == 401
    assert anonymous.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    _, reader = await api.user("acme/shop", "clerk")
    forbidden = await api.client.post(url, json=body, headers={"Authorization": f"Bearer {reader}"})
    assert forbidden.status_code == 403
    headers = {"Authorization": f"Bearer {api.admin_token}"}
    bad = await api.client.post(url, json=body | {"extra": 1}, headers=headers)
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["extensions"]["pointer"] == "/extra"
    dup = await api.client.post(url, content=b'{"namespace":"a","namespace":"b"}', headers=headers)
    assert dup.status_code == 400
    done = await api.client.post(url, json=body, headers=headers)
    assert done.status_code == 200, done.text
    answer = done.json()
    assert (answer["messageId"], answer["duplicate"], answer["delivered"]) == (
        "http-1", False, [pid]
    )  # fmt: skip
    again = (await api.client.post(url, json=body, headers=headers)).json()
    assert again["duplicate"] is True
