"""A workflow's own webhook (issue 13, seed §11): set in the registry with its secret, it
takes precedence over the namespace webhook for that workflow's SLA breaches; the secret is
never readable."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from graph_stack import Api, loan

from stateward.runtime import ticker
from stateward.runtime.core.clock import ManualClock

SET = """mutation($n:String!,$u:String,$s:String,$w:String){
  setWebhook(namespace:$n,url:$u,secret:$s,workflow:$w){namespace webhookUrl}}"""
DELIVERIES = """query($n:String!){webhookDeliveries(namespace:$n){
  edges{node{namespace url eventType status payload}}}}"""
DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
START = "mutation($w:String!){startInstance(workflow:$w){instanceId}}"
SUBMIT = """mutation($i:ID!){performAction(instance:$i,action:"submit",
  input:{fields:{amount:5}}){duplicate}}"""


class Catcher:
    """A real HTTP receiver recording (path, headers, body) of each POST."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, str], bytes]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.posts.append((self.path, dict(self.headers), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def catcher() -> Any:
    server = Catcher()
    yield server
    server.close()


async def test_a_workflow_webhook_takes_precedence_for_its_breaches(
    api: Api, catcher: Catcher
) -> None:
    clock = ManualClock(datetime.now(UTC))
    api.runtime.clock = clock
    await api.ok(DEPLOY, {"d": loan()})
    await api.ok(DEPLOY, {"d": loan("acme/loans/other")})
    await api.ok(SET, {"n": "acme/loans", "u": f"{catcher.base}/ns", "s": "ns-secret"})
    done = await api.ok(SET, {"n": "acme/loans", "u": f"{catcher.base}/own", "s": "wf-s3cret",
                              "w": "acme/loans/loan"})  # fmt: skip
    assert done["setWebhook"]["webhookUrl"] == f"{catcher.base}/ns"  # the namespace's, as before
    for path in ("acme/loans/loan", "acme/loans/other"):
        pid = (await api.ok(START, {"w": path}))["startInstance"]["instanceId"]
        await api.ok(SUBMIT, {"i": pid})
    clock.advance(3601)
    report = await ticker.tick(api.runtime)
    assert len(report.sla.breaches) == 2
    await ticker.tick(api.runtime)
    by_path = {p: (h, b) for p, h, b in catcher.posts}
    assert set(by_path) == {"/own", "/ns"}
    headers, body = by_path["/own"]
    assert json.loads(body)["workflow"] == "acme/loans/loan"
    signature = {k.lower(): v for k, v in headers.items()}["x-stateward-signature"]
    expected = hmac.new(b"wf-s3cret", body, hashlib.sha256).hexdigest()
    assert signature == f"sha256={expected}"
    assert json.loads(by_path["/ns"][1])["workflow"] == "acme/loans/other"
    listed = (await api.ok(DELIVERIES, {"n": "acme/loans"}))["webhookDeliveries"]["edges"]
    scopes = sorted(e["node"]["namespace"] for e in listed)
    assert scopes == ["acme/loans", "workflow:acme/loans/loan"]
    # the secret is held in the registry and readable nowhere
    registry = await api.ok('{registry(namespace:"acme/loans"){webhookUrl members{actor}}}')
    assert "wf-s3cret" not in json.dumps(registry) and "wf-s3cret" not in json.dumps(listed)
    # removing the workflow's webhook falls back to the namespace's
    await api.ok(SET, {"n": "acme/loans", "u": None, "w": "acme/loans/loan"})


async def test_only_an_admin_sets_a_workflow_webhook_and_only_in_its_namespace(
    api: Api, catcher: Catcher
) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    _, analyst = await api.user("acme/loans", "analyst")
    args = {"n": "acme/loans", "u": f"{catcher.base}/x", "w": "acme/loans/loan"}
    body = await api.gql(SET, args, token=analyst)
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    _, stranger = await api.user()
    assert (await api.gql(SET, args, token=stranger))["errors"]
    foreign = await api.gql(SET, {**args, "w": "globex/loans/loan"})
    assert foreign["errors"][0]["extensions"]["code"] in ("TARGET_MISMATCH", "INVALID_INPUT")
