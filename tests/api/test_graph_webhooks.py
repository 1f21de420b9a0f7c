"""Webhooks through the API: `setWebhook` is a registry event of an admin, and
`webhookDeliveries` shows every attempt (status, attempts, last error) to admins only."""

from __future__ import annotations

import http.server
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from graph_stack import Api, loan

from stateward.runtime import ticker
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.sweeps import webhooks

SET = """mutation($n:String!,$u:String,$s:String){setWebhook(namespace:$n,url:$u,secret:$s){
  namespace webhookUrl}}"""
DELIVERIES = """query($n:String!,$s:WebhookDeliveryStatus,$f:Int,$a:String){
  webhookDeliveries(namespace:$n,status:$s,first:$f,after:$a){
    edges{cursor node{id namespace url eventType payload status attempts lastError
      nextAttemptAt createdAt deliveredAt}}
    pageInfo{hasNextPage hasPreviousPage}}}"""
DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
START = 'mutation{startInstance(workflow:"acme/loans/loan"){instanceId}}'
SUBMIT = """mutation($i:ID!){performAction(instance:$i,action:"submit",
  input:{fields:{amount:5}}){duplicate}}"""


class Receiver:
    """A real HTTP server on 127.0.0.1 answering POSTs with `statuses` in turn, then 200."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.calls = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.calls += 1
                self.send_response(outer.statuses.pop(0) if outer.statuses else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop the server."""
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Any:
    server = Receiver([500])
    yield server
    server.close()


def code(body: dict[str, Any]) -> str:
    """The `extensions.code` of the first error of a response."""
    return str(body["errors"][0]["extensions"]["code"])


async def _breach(api: Api) -> str:
    """A loan in review whose one-hour SLA is then over (the node's clock moved by hand)."""
    clock = ManualClock(datetime.now(UTC))
    api.runtime.clock = clock
    await api.ok(DEPLOY, {"d": loan()})
    pid = str((await api.ok(START))["startInstance"]["instanceId"])
    await api.ok(SUBMIT, {"i": pid})
    clock.advance(3601)
    return pid


async def _deliveries(api: Api, token: str = "admin", **args: Any) -> list[dict[str, Any]]:
    found = await api.ok(DELIVERIES, {"n": "acme", **args}, token=token)
    return [e["node"] for e in found["webhookDeliveries"]["edges"]]


async def test_a_breach_delivery_shows_its_failed_then_successful_attempt(
    api: Api, receiver: Receiver
) -> None:
    done = await api.ok(SET, {"n": "acme", "u": receiver.url, "s": "s3cret"})
    assert done["setWebhook"] == {"namespace": "acme", "webhookUrl": receiver.url}
    pid = await _breach(api)
    report = await ticker.tick(api.runtime)
    assert report.sla.breaches == [pid]
    [first] = await _deliveries(api)
    assert (first["status"], first["attempts"], first["lastError"]) == ("PENDING", 1, "HTTP 500")
    assert first["namespace"] == "acme" and first["url"] == receiver.url
    assert first["eventType"] == "workflow.sla.breached"
    assert first["payload"]["instanceId"] == pid
    assert first["nextAttemptAt"] and first["deliveredAt"] is None
    api.runtime.clock.advance(webhooks.backoff_seconds(1))  # type: ignore[attr-defined]
    await ticker.tick(api.runtime)
    [done_] = await _deliveries(api)
    assert (done_["id"], done_["status"], done_["attempts"]) == (first["id"], "DELIVERED", 2)
    assert done_["deliveredAt"] and done_["nextAttemptAt"] is None
    assert receiver.calls == 2
    assert await _deliveries(api, s="FAILED") == []
    assert [d["id"] for d in await _deliveries(api, s="DELIVERED")] == [first["id"]]


async def test_deliveries_page_newest_first(api: Api, receiver: Receiver) -> None:
    receiver.statuses = []
    await api.ok(SET, {"n": "acme", "u": receiver.url})
    await _breach(api)
    pid = str((await api.ok(START))["startInstance"]["instanceId"])
    await api.ok(SUBMIT, {"i": pid})
    api.runtime.clock.advance(3601)  # type: ignore[attr-defined]
    await ticker.tick(api.runtime)
    everything = await _deliveries(api)
    assert len(everything) == 2 and everything[0]["id"] > everything[1]["id"]
    page = (await api.ok(DELIVERIES, {"n": "acme", "f": 1}))["webhookDeliveries"]
    assert page["pageInfo"] == {"hasNextPage": True, "hasPreviousPage": False}
    after = page["edges"][0]["cursor"]
    rest = (await api.ok(DELIVERIES, {"n": "acme", "f": 1, "a": after}))["webhookDeliveries"]
    assert [e["node"]["id"] for e in rest["edges"]] == [everything[1]["id"]]
    assert rest["pageInfo"] == {"hasNextPage": False, "hasPreviousPage": True}


async def test_only_admins_of_the_namespace_set_a_webhook_or_read_its_deliveries(
    api: Api, receiver: Receiver
) -> None:
    _, analyst = await api.user("acme", "analyst")
    _, outsider = await api.user("other", "admin")
    _, acme_admin = await api.user("acme", "admin")
    assert code(await api.gql(SET, {"n": "acme", "u": receiver.url}, token=analyst)) == (
        "FORBIDDEN"
    )
    assert code(await api.gql(SET, {"n": "acme", "u": receiver.url}, token=outsider)) == (
        "FORBIDDEN"
    )
    assert code(await api.gql(DELIVERIES, {"n": "acme"}, token=analyst)) == "FORBIDDEN"
    assert code(await api.gql(DELIVERIES, {"n": "acme"}, token=outsider)) == "NOT_FOUND"
    assert code(await api.gql(DELIVERIES, {"n": "acme"}, token=None)) == "UNAUTHENTICATED"
    await api.ok(SET, {"n": "acme", "u": receiver.url}, token=acme_admin)
    assert await _deliveries(api, token=acme_admin) == []
    nested = await api.ok(DELIVERIES, {"n": "acme/loans"}, token=acme_admin)
    assert nested["webhookDeliveries"]["edges"] == []


async def test_a_null_url_removes_the_webhook_and_bad_arguments_are_invalid_input(
    api: Api, receiver: Receiver
) -> None:
    await api.ok(SET, {"n": "acme", "u": receiver.url, "s": "k"})
    removed = await api.ok(SET, {"n": "acme", "u": None})
    assert removed["setWebhook"]["webhookUrl"] is None
    assert code(await api.gql(SET, {"n": "acme", "u": "ftp://x"})) == "INVALID_INPUT"
    # a status outside the enum is refused before execution
    assert (
        code(await api.gql(DELIVERIES, {"n": "acme", "s": "lost"})) == "GRAPHQL_VALIDATION_FAILED"
    )
    assert code(await api.gql(DELIVERIES, {"n": "Not A Namespace"})) == "INVALID_INPUT"
    assert code(await api.gql(DELIVERIES, {"n": "acme", "a": "bad"})) == "INVALID_INPUT"


async def test_the_secret_is_not_a_field_of_the_registry(api: Api) -> None:
    body = await api.gql('{registry(namespace:"acme"){webhookSecret}}')
    assert code(body) == "GRAPHQL_VALIDATION_FAILED"


async def test_the_secret_never_leaves_the_server_through_the_log_or_registry_data(
    api: Api,
) -> None:
    await api.gql(SET, {"n": "acme", "u": "https://hooks.example/x", "s": "hunter2-secret"})
    _, analyst_token = await api.user("acme", "analyst")
    query = """{events(process:"acme-registry"){edges{node{action input envelope}}}}"""
    for token in ("admin", analyst_token):
        body = await api.gql(query, token=token)
        assert "errors" not in body, body
        nodes = [e["node"] for e in body["data"]["events"]["edges"]]
        hooks = [n for n in nodes if n["action"] == "set_webhook"]
        assert hooks and hooks[0]["input"]["secret"] == "[redacted]"
        assert "hunter2-secret" not in str(nodes)
    async with api.runtime.uow(readonly=True) as uow:
        registry = await uow.processes.get("acme-registry")
        hook = await uow.webhooks.get("acme")
    assert registry is not None and registry.data["webhook"]["signed"] is True
    assert "hunter2-secret" not in str(registry.data)
    assert hook is not None and hook.secret == "hunter2-secret"  # kept where delivery needs it
