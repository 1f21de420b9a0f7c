"""A GraphQL request leaves no reference cycle behind (issue 18, `gc18`): its executor, the
request context and everything they reach are freed by reference counting when the
request ends, not left for the cyclic collector. graphql-core's executor refers to
itself through `async_helpers`; `PerEventExecutionContext.build_response` breaks that.
Checked with the collector's DEBUG_SAVEALL on the real stack: mutations, queries, an
error answer and a subscription's events."""

from __future__ import annotations

import gc
from typing import Any

from graph_stack import Api, loan
from graphql.execution import Executor
from test_graph_subscriptions import EVENTS, Socket, _subscribed, ws_url  # noqa: F401  (the fixture)

from stateward.http.context import RequestContext

DEPLOY = "mutation($d: JSON!) { addWorkflow(definition: $d) { path } }"
START = "mutation($w: String!) { startInstance(workflow: $w) { instanceId } }"
PERFORM = """mutation($i: ID!, $a: String!, $in: JSON) {
  performAction(instance: $i, action: $a, input: $in) { event { seq action } } }"""
READ = "query($i: ID!) { instance(id: $i) { id data } }"


class _Unreachable:
    """What the collector finds unreachable inside the block (DEBUG_SAVEALL keeps it in
    `gc.garbage` instead of freeing it)."""

    def __enter__(self) -> list[Any]:
        gc.collect()
        gc.garbage.clear()
        gc.set_debug(gc.DEBUG_SAVEALL)
        self.found: list[Any] = []
        return self.found

    def __exit__(self, *exc: object) -> None:
        try:
            gc.collect()
            self.found.extend(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()


def _ours(garbage: list[Any]) -> list[str]:
    return [type(o).__qualname__ for o in garbage if isinstance(o, Executor | RequestContext)]


async def test_requests_leave_no_executor_or_request_context_in_a_cycle(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    pid = (await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]["instanceId"]
    with _Unreachable() as garbage:
        await api.ok(PERFORM, {"i": pid, "a": "submit", "in": {"fields": {"amount": 5}}})
        for _ in range(5):
            await api.ok(READ, {"i": pid})
        refused = await api.gql(PERFORM, {"i": pid, "a": "no-such-action"})
        assert refused.get("errors")
    assert garbage, "DEBUG_SAVEALL saw nothing at all: the check itself is broken"
    assert _ours(garbage) == []


async def test_subscription_events_leave_no_executor_in_a_cycle(api: Api, ws_url: str) -> None:  # noqa: F811
    """Each event runs on a per-event copy of the subscription's executor: the copies are
    freed as they finish, and the subscription keeps the helpers they share (the second
    event is answered too)."""
    await api.ok(DEPLOY, {"d": loan()})
    pids = [
        (await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]["instanceId"]
        for _ in range(2)
    ]
    sock = await Socket.open(ws_url, api.admin_token)
    try:
        await sock.subscribe(EVENTS, {"f": {"types": ["workflow.advanced"]}})
        await _subscribed(api, 1)
        with _Unreachable() as garbage:
            await api.ok(PERFORM, {"i": pids[0], "a": "submit", "in": {"fields": {"amount": 5}}})
            first = (await sock.next())["events"]
        await api.ok(PERFORM, {"i": pids[1], "a": "submit", "in": {"fields": {"amount": 6}}})
        second = (await sock.next())["events"]
    finally:
        await sock.close()
    assert [first["instanceId"], second["instanceId"]] == pids
    assert _ours(garbage) == []
