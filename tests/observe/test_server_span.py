"""The SERVER span of a request (`observe.http.ServerSpanMiddleware`, issue 17): the HTTP
semantic-convention attributes and the caller's W3C `traceparent` as parent when the
request is sampled; nothing recorded (and no child built) when it is not."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from graph_stack import Api, open_stack, recorded_spans
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from starlette.types import Message, Receive, Scope, Send

from stateward.observe import tracing
from stateward.observe.http import ServerSpanMiddleware

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
QUERY = "query Hello { __typename }"


def traceparent(sampled: bool) -> str:
    return f"00-{TRACE_ID}-{PARENT_ID}-{'01' if sampled else '00'}"


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """stateward's own provider (its sampler from the standard variables: a root is
    never sampled, so only a sampled caller's request is recorded: parent-based)."""
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0")
    with recorded_spans(tracing.make_provider()) as memory:
        yield memory


@pytest.fixture
async def stack(sqlite_db_url: str, exporter: InMemorySpanExporter) -> AsyncIterator[Api]:
    api, close = await open_stack(sqlite_db_url)
    try:
        yield api
    finally:
        await close()


async def post(api: Api, query: str, headers: dict[str, str]) -> dict[str, Any]:
    response = await api.client.post("/graphql", json={"query": query}, headers=headers)
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def server_span(spans: tuple[ReadableSpan, ...]) -> ReadableSpan:
    (found,) = [s for s in spans if s.kind is SpanKind.SERVER]
    return found


async def test_a_sampled_caller_gets_a_server_span_under_its_traceparent(
    stack: Api, exporter: InMemorySpanExporter
) -> None:
    await post(stack, QUERY, {"traceparent": traceparent(True), "user-agent": "probe/1"})
    spans = exporter.get_finished_spans()
    server = server_span(spans)
    assert server.name == "POST /graphql"
    assert f"{server.context.trace_id:032x}" == TRACE_ID
    assert server.parent is not None and server.parent.is_remote
    assert f"{server.parent.span_id:016x}" == PARENT_ID
    attributes = dict(server.attributes or {})
    assert attributes == {
        "http.request.method": "POST",
        "url.scheme": "http",
        "url.path": "/graphql",
        "http.route": "/graphql",
        "network.protocol.version": "1.1",
        "server.address": "t",
        "client.address": "127.0.0.1",
        "client.port": 123,
        "user_agent.original": "probe/1",
        "http.response.status_code": 200,
        # the GraphQL operation is recorded on the request's span (no span of its own)
        "graphql.operation.name": "Hello",
        "graphql.operation.type": "query",
        "stateward.outcome": "ok",
    }
    assert server.status.status_code is StatusCode.UNSET
    steps = [s for s in spans if s.name.startswith("graphql.")]
    assert sorted(s.name for s in steps) == ["graphql.execute", "graphql.parse", "graphql.validate"]
    assert all(s.parent is not None and s.parent.span_id == server.context.span_id for s in steps)
    assert {s.context.trace_id for s in spans} == {server.context.trace_id}


async def test_an_unsampled_request_records_nothing_and_keeps_its_trace_id(
    stack: Api, exporter: InMemorySpanExporter
) -> None:
    """Neither an unsampled caller's request nor a root the sampler drops records a span;
    an error still names the trace (the caller's, when it sent one)."""
    bad = 'mutation { startInstance(workflow: "no/such/flow") { id } }'
    body = await post(stack, bad, {"traceparent": traceparent(False)})
    assert body["errors"][0]["extensions"]["traceId"] == TRACE_ID
    await post(stack, QUERY, {})
    assert exporter.get_finished_spans() == ()


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    """An ASGI app that answers with what the current span is."""
    current = trace.get_current_span()
    context = current.get_span_context()
    scope["seen"] = (current.is_recording(), f"{context.trace_id:032x}", context.is_valid)
    await send({"type": "http.response.start", "status": 503, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def scope_for(headers: list[tuple[bytes, bytes]]) -> Scope:
    return {
        "type": "http",
        "method": "GET",
        "scheme": "https",
        "path": "/healthz",
        "http_version": "1.1",
        "headers": [(b"host", b"[::1]:8443"), *headers],
        "client": ("10.0.0.7", 40000),
        "server": ("::1", 8443),
    }


async def call(scope: Scope) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await ServerSpanMiddleware(echo)(scope, receive, send)
    return sent


async def test_the_unsampled_span_is_current_but_not_recording(
    exporter: InMemorySpanExporter,
) -> None:
    scope = scope_for([(b"traceparent", traceparent(False).encode())])
    await call(scope)
    assert scope["seen"] == (False, TRACE_ID, True)
    assert exporter.get_finished_spans() == ()


async def test_a_5xx_answer_marks_the_span_an_error(exporter: InMemorySpanExporter) -> None:
    scope = scope_for([(b"traceparent", traceparent(True).encode())])
    sent = await call(scope)
    assert sent[0]["status"] == 503 and scope["seen"] == (True, TRACE_ID, True)
    server = server_span(exporter.get_finished_spans())
    assert server.name == "GET"  # no router: no route to name it after
    attributes = dict(server.attributes or {})
    assert attributes["server.address"] == "::1" and attributes["server.port"] == 8443
    assert attributes["url.scheme"] == "https"
    assert attributes["http.response.status_code"] == 503
    assert attributes["error.type"] == "503"
    assert server.status.status_code is StatusCode.ERROR


async def test_an_http_request_s_span_is_claimed_once_a_websocket_s_never(
    exporter: InMemorySpanExporter,
) -> None:
    """The GraphQL operation of an HTTP request is recorded on the request's span (the
    first claim gets it); operations over a websocket each get a span of their own."""
    claims: list[Any] = []

    async def claiming(scope: Scope, receive: Receive, send: Send) -> None:
        claims.extend([tracing.claim_request_span(), tracing.claim_request_span()])
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        return None

    scope = scope_for([(b"traceparent", traceparent(True).encode())])
    await ServerSpanMiddleware(claiming)(scope, receive, send)
    assert claims[0] is not None and claims[0].get_span_context().trace_id == int(TRACE_ID, 16)
    assert claims[1] is None
    assert tracing.claim_request_span() is None  # the request is over
    claims.clear()
    websocket = {**scope_for([(b"traceparent", traceparent(True).encode())]), "type": "websocket"}
    await ServerSpanMiddleware(claiming)(websocket, receive, send)
    assert claims == [None, None]
