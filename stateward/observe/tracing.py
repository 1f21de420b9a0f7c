"""OpenTelemetry traces: on when the standard OTLP variables name a collector, else off.

`configure_from_env()` (called by the server) builds a `TracerProvider` exporting over
OTLP/HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; the
exporter reads the other `OTEL_*` variables itself, the resource `OTEL_SERVICE_NAME`,
default `stateward`). Tests `install()` a provider of their own (an in-memory exporter).
While no provider is installed, `span()` yields None without touching OpenTelemetry, the
ASGI app and the database engine are not wrapped, so tracing off costs a flag test.

Tracing on is kept cheap (issue 17): spans go through a `BatchSpanProcessor` (exported
from its own thread, in batches; `OTEL_BSP_*` tune it); the sampler is the one the
standard `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` variables choose (default
`parentbased_always_on`; e.g. `parentbased_traceidratio` with `0.1` records a tenth of
the requests, and an unsampled request's spans cost no attribute building and no export);
SQL statements get spans only when `STATEWARD_TRACE_SQL=1` asks for them (they were 18
of a `performAction`'s 28 spans).

Spans: the ASGI request (instrumentation), `graphql.operation` with `graphql.parse`,
`graphql.validate`, `graphql.execute`; `act` with `act.verify`, `act.engine`,
`act.commit`, `act.publish`; `hook.run`; `sweep.<name>`; SQL statements (SQLAlchemy
instrumentation, only with `STATEWARD_TRACE_SQL=1`). The group-commit writer applies
events of other tasks: it carries each caller's context (`current()` / `attached()`) and
records the shared commit as an `act.commit` span under every sampled caller
(`record_span`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context

if TYPE_CHECKING:  # the SDK is imported only when tracing is configured
    from opentelemetry.sdk.trace import TracerProvider

ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
SERVICE_NAME = "stateward"

_provider: TracerProvider | None = None
_tracer: trace.Tracer | None = None


def env_enabled(env: dict[str, str] | None = None) -> bool:
    """True when an OTLP endpoint is configured and the SDK is not disabled."""
    e = env if env is not None else os.environ
    if e.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(e.get(name, "").strip() for name in ENDPOINT_ENVS)


def configure_from_env() -> bool:
    """Install an OTLP-exporting provider when the environment asks for one."""
    if _provider is not None or not env_enabled():
        return _provider is not None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = make_provider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    install(provider)
    return True


def make_provider() -> TracerProvider:
    """A provider named by `OTEL_SERVICE_NAME` (default `stateward`) whose sampler is the
    one `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` choose (the SDK reads them)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", SERVICE_NAME)})
    return TracerProvider(resource=resource)


def install(provider: TracerProvider | None) -> None:
    """Use `provider` for stateward's spans (None: tracing off)."""
    global _provider, _tracer
    _provider = provider
    _tracer = provider.get_tracer("stateward") if provider is not None else None


def provider() -> TracerProvider | None:
    """The installed provider (None while tracing is off)."""
    return _provider


def enabled() -> bool:
    """Whether spans are recorded."""
    return _tracer is not None


def shutdown() -> None:
    """Flush and stop the installed provider's exporters (at process exit)."""
    if _provider is not None:
        _provider.shutdown()


@contextmanager
def span(
    name: str, *, parent: Context | None = None, attributes: Mapping[str, Any] | None = None
) -> Iterator[Any]:
    """A current span named `name` (None, and nothing else, while tracing is off)."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(name, context=parent) as current_span:
        if attributes and current_span.is_recording():
            _set_attributes(current_span, attributes)
        yield current_span


def start(name: str, attributes: Mapping[str, Any] | None = None) -> Any:
    """A span that is NOT made current (end it with `.end()`); None while off."""
    if _tracer is None:
        return None
    started = _tracer.start_span(name)
    if attributes and started.is_recording():
        _set_attributes(started, attributes)
    return started


def _set_attributes(target: Any, attributes: Mapping[str, Any]) -> None:
    """Set the non-None `attributes` on a recording span (never called for a dropped one)."""
    for key, value in attributes.items():
        if value is not None:
            target.set_attribute(key, value)


def recording(target: Any) -> bool:
    """Whether `target` (from `span()` / `start()`) records: attributes are worth building."""
    return target is not None and bool(target.is_recording())


def context_of(started: Any) -> Context | None:
    """A context whose current span is `started` (for its children), or None."""
    return None if started is None else trace.set_span_in_context(started)


def current() -> Context | None:
    """The caller's context, to carry into another task (None while off)."""
    return otel_context.get_current() if _tracer is not None else None


@contextmanager
def attached(ctx: Context | None) -> Iterator[None]:
    """Make `ctx` (from `current()`) the current context for the block."""
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def record_span(name: str, start_ns: int, end_ns: int, parents: Iterable[Context | None]) -> None:
    """Record a finished span [start_ns, end_ns] under each of `parents` (shared work)."""
    if _tracer is None:
        return
    for parent in parents:
        if parent is not None and trace.get_current_span(parent).is_recording():
            _tracer.start_span(name, context=parent, start_time=start_ns).end(end_time=end_ns)


def instrument_engine(engine: Any, *, sql: bool = False) -> bool:
    """Trace the SQL statements of an (async) SQLAlchemy engine when tracing is on and
    `sql` (`STATEWARD_TRACE_SQL=1`) asks for it; True when instrumented."""
    if _provider is None or not sql:
        return False
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

    sync_engine = getattr(engine, "sync_engine", engine)
    SQLAlchemyInstrumentor().instrument(engine=sync_engine, tracer_provider=_provider)
    return True
