"""OpenTelemetry: one `performAction` gives an `act` span with its steps as children,
and the trace id reaches error responses."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from graph_stack import Api, loan, open_stack, recorded_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from stateward.observe import tracing

DEPLOY = "mutation($d: JSON!) { addWorkflow(definition: $d) { path } }"
START = "mutation($w: String!) { startInstance(workflow: $w) { id } }"
PERFORM = """mutation Submit($i: ID!) {
  performAction(instance: $i, action: "submit", input: {fields: {amount: 5}}) { duplicate } }"""


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    with recorded_spans(TracerProvider()) as memory:
        yield memory


@pytest.fixture
async def traced(sqlite_db_url: str, exporter: InMemorySpanExporter) -> AsyncIterator[Api]:
    stack, close = await open_stack(sqlite_db_url)
    try:
        yield stack
    finally:
        await close()


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[str]:
    return sorted(
        s.name for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id
    )


async def test_perform_action_traces_act_with_verify_engine_commit_publish(
    traced: Api, exporter: InMemorySpanExporter
) -> None:
    await traced.ok(DEPLOY, {"d": loan()})
    instance = (await traced.ok(START, {"w": "acme/loans/loan"}))["startInstance"]["id"]
    exporter.clear()
    await traced.ok(PERFORM, {"i": instance})
    spans = list(exporter.get_finished_spans())
    acts = [s for s in spans if s.name == "act"]
    assert len(acts) == 1
    act = acts[0]
    assert act.attributes is not None and act.attributes["stateward.op"] == "business"
    assert children(spans, act) == ["act.commit", "act.engine", "act.publish", "act.verify"]
    execute = next(s for s in spans if s.name == "graphql.execute")
    assert act.parent is not None and act.parent.span_id == execute.context.span_id
    # Over HTTP the operation is recorded on the request's SERVER span (issue 17).
    (operation,) = [s for s in spans if s.kind.name == "SERVER"]
    assert children(spans, operation) == ["graphql.execute", "graphql.parse", "graphql.validate"]
    assert operation.attributes is not None
    assert operation.attributes["graphql.operation.name"] == "Submit"
    assert operation.attributes["graphql.operation.type"] == "mutation"
    assert operation.attributes["stateward.outcome"] == "ok"
    assert not any(s.name == "graphql.operation" for s in spans)
    assert {s.context.trace_id for s in spans} == {act.context.trace_id}


async def test_an_error_response_names_its_trace_id(
    traced: Api, exporter: InMemorySpanExporter
) -> None:
    body = await traced.gql('mutation { startInstance(workflow: "no/such/flow") { id } }')
    extensions = body["errors"][0]["extensions"]
    assert extensions["code"] == "NOT_FOUND"
    trace_ids = {f"{s.context.trace_id:032x}" for s in exporter.get_finished_spans()}
    assert extensions["traceId"] in trace_ids
    assert extensions["requestId"]


async def test_sql_statements_get_spans_only_when_asked(
    traced: Api, exporter: InMemorySpanExporter
) -> None:
    """STATEWARD_TRACE_SQL: no per-statement spans by default (issue 17), spans when asked."""
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

    engine = traced.runtime.engine
    assert tracing.instrument_engine(engine) is False
    assert tracing.instrument_engine(engine, sql=True) is True
    try:
        exporter.clear()
        await traced.ok(DEPLOY, {"d": loan()})
        assert any(
            s.attributes is not None and "db.statement" in s.attributes
            for s in exporter.get_finished_spans()
        )
    finally:
        SQLAlchemyInstrumentor().uninstrument()


@pytest.fixture
def sampled_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The provider stateward builds, with the standard sampler variable set to record nothing."""
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    with recorded_spans(tracing.make_provider()) as memory:
        yield memory


async def test_the_sampler_follows_otel_traces_sampler(
    sqlite_db_url: str, sampled_off: InMemorySpanExporter
) -> None:
    """OTEL_TRACES_SAMPLER=always_off: actions work, no span is recorded or exported,
    and an error still names a (valid, unsampled) trace id."""
    stack, close = await open_stack(sqlite_db_url)
    try:
        await stack.ok(DEPLOY, {"d": loan()})
        instance = (await stack.ok(START, {"w": "acme/loans/loan"}))["startInstance"]["id"]
        await stack.ok(PERFORM, {"i": instance})
        body = await stack.gql('mutation { startInstance(workflow: "no/such/flow") { id } }')
    finally:
        await close()
    assert sampled_off.get_finished_spans() == ()
    extensions = body["errors"][0]["extensions"]
    assert extensions["code"] == "NOT_FOUND"
    assert len(extensions["traceId"]) == 32 and int(extensions["traceId"], 16) != 0
