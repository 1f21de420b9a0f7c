"""stateward's default head sampler (issue 17): when `OTEL_TRACES_SAMPLER` names none, a
parent-based sampler records `STATEWARD_TRACE_SAMPLE_RATIO` (default 0.1) of the root
requests and follows the caller's decision; the standard variables still win, and an
unsampled request still names its trace in logs and errors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from graph_stack import Api, open_stack, recorded_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

from stateward.observe import context, tracing

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
QUERY = "query Hello { __typename }"
BAD = 'mutation { startInstance(workflow: "no/such/flow") { id } }'


def root_of(sampler: object) -> object:
    assert isinstance(sampler, ParentBased)
    return sampler._root  # the sampler of requests without a caller's decision


def test_one_root_in_ten_by_default_parent_based() -> None:
    root = root_of(tracing.default_sampler({}))
    assert isinstance(root, TraceIdRatioBased) and root.rate == 0.1


def test_the_ratio_comes_from_stateward_trace_sample_ratio() -> None:
    root = root_of(tracing.default_sampler({"STATEWARD_TRACE_SAMPLE_RATIO": "0.25"}))
    assert isinstance(root, TraceIdRatioBased) and root.rate == 0.25
    assert root_of(tracing.default_sampler({"STATEWARD_TRACE_SAMPLE_RATIO": "1"})) is ALWAYS_ON
    for bad in ("-0.1", "1.5", "nan", "often"):
        with pytest.raises(ValueError, match="STATEWARD_TRACE_SAMPLE_RATIO"):
            tracing.default_sampler({"STATEWARD_TRACE_SAMPLE_RATIO": bad})


def test_the_standard_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"OTEL_TRACES_SAMPLER": "always_on", "STATEWARD_TRACE_SAMPLE_RATIO": "0.5"}
    assert tracing.default_sampler(env) is None  # the SDK builds the one it names
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_on")
    assert tracing.make_provider().sampler is ALWAYS_ON
    monkeypatch.delenv("OTEL_TRACES_SAMPLER")
    monkeypatch.setenv("STATEWARD_TRACE_SAMPLE_RATIO", "0.5")
    assert root_of(tracing.make_provider().sampler).rate == 0.5  # type: ignore[attr-defined]


@pytest.fixture
def default_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The provider stateward builds when the operator names no sampler."""
    monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    monkeypatch.delenv("STATEWARD_TRACE_SAMPLE_RATIO", raising=False)
    with recorded_spans(tracing.make_provider()) as memory:
        yield memory


def test_about_one_root_in_ten_is_recorded(default_provider: InMemorySpanExporter) -> None:
    """2,000 root spans: ≈ 200 recorded (binomial, σ ≈ 13); an unsampled one is still
    current with a valid trace id that log lines carry."""
    unsampled_ids: list[str | None] = []
    for _ in range(2000):
        with tracing.span("root") as root:
            if not root.is_recording():
                unsampled_ids.append(context.trace_ids()[0])
    recorded = len(default_provider.get_finished_spans())
    assert 120 < recorded < 280
    assert len(unsampled_ids) == 2000 - recorded
    assert all(t is not None and len(t) == 32 and int(t, 16) for t in unsampled_ids)


@pytest.fixture
async def stack(sqlite_db_url: str, default_provider: InMemorySpanExporter) -> AsyncIterator[Api]:
    api, close = await open_stack(sqlite_db_url)
    try:
        yield api
    finally:
        await close()


async def test_a_caller_s_decision_is_followed_and_errors_name_their_trace(
    stack: Api, default_provider: InMemorySpanExporter
) -> None:
    """A sampled caller's request is recorded whole (never one in ten of it); an
    unsampled caller's is not, and its error still names the caller's trace."""
    sampled = {"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"}
    response = await stack.client.post("/graphql", json={"query": QUERY}, headers=sampled)
    assert response.status_code == 200
    names = {s.name for s in default_provider.get_finished_spans()}
    assert {"POST /graphql", "graphql.parse", "graphql.validate", "graphql.execute"} <= names
    default_provider.clear()
    unsampled = {"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-00"}
    response = await stack.client.post("/graphql", json={"query": BAD}, headers=unsampled)
    assert response.json()["errors"][0]["extensions"]["traceId"] == TRACE_ID
    assert default_provider.get_finished_spans() == ()
