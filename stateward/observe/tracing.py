"""OpenTelemetry traces: on when the standard OTLP variables name a collector, else off.

`configure_from_env()` (called by the server) builds a `TracerProvider` exporting over
OTLP/HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; the
exporter reads the other `OTEL_*` variables itself, the resource `OTEL_SERVICE_NAME`,
default `stateward`). Tests `install()` a provider of their own (an in-memory exporter).
While no provider is installed, `span()` yields None without touching OpenTelemetry, the
ASGI app and the database engine are not wrapped, so tracing off costs a flag test.

Tracing on is kept cheap (issue 17): spans go through a `BatchSpanProcessor` (exported
from its own thread, in batches; `OTEL_BSP_*` tune it); the sampler is the one the
standard `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` variables choose or, when
`OTEL_TRACES_SAMPLER` is unset, stateward's default: parent-based, recording one root
request in `1 / STATEWARD_TRACE_SAMPLE_RATIO` (default 0.1, one in ten; `1` records every
request, as OpenTelemetry's own default would) and every request whose caller sampled
it. An unsampled request costs one sampler decision: with a parent-based
sampler `span()` / `start()` build no child under an unsampled span (they hand back that
span, whose trace id still names the request), and nothing is exported. A recorded span
costs ≈ 20 µs to build and end and ≈ 12 µs to encode in the exporter's thread (measured
in process, issue 17); `span()` skips the API's generic context-manager layers. SQL
statements get spans only when `STATEWARD_TRACE_SQL=1` asks for them (they were 18 of a
`performAction`'s 28 spans).

Spans: the HTTP request or websocket (a SERVER span with the HTTP semantic-convention
attributes and the caller's W3C `traceparent` as parent: `http.ServerSpanMiddleware`,
ours, not OpenTelemetry's ASGI instrumentation, see there), the GraphQL operation with
`graphql.parse`, `graphql.validate`, `graphql.execute` as children (an operation over
HTTP is recorded on the request's SERVER span, `graphql.operation.*` attributes; one over
a websocket gets a `graphql.operation` span of its own); `act` with `act.verify`, `act.engine`,
`act.commit`, `act.publish`; `hook.run`; `sweep.<name>`; SQL statements (SQLAlchemy
instrumentation, only with `STATEWARD_TRACE_SQL=1`). The group-commit writer applies
events of other tasks: it carries each caller's context (`current()` / `attached()`) and
records the shared commit as an `act.commit` span under every sampled caller
(`record_span`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode

if TYPE_CHECKING:  # the SDK is imported only when tracing is configured
    from opentelemetry.sdk.trace import TracerProvider

ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
SERVICE_NAME = "stateward"
SAMPLER_ENV = "OTEL_TRACES_SAMPLER"
RATIO_ENV = "STATEWARD_TRACE_SAMPLE_RATIO"
#: Root requests recorded when no sampler is named: one in ten (docs/decisions.md,
#: "A default head sampler"); every request whose caller sampled it is recorded too.
DEFAULT_SAMPLE_RATIO = 0.1

_provider: TracerProvider | None = None
#: The HTTP request's SERVER span until one GraphQL operation claims it (`claim_request_span`).
_request_span: ContextVar[list[Any] | None] = ContextVar("stateward_request_span", default=None)
_tracer: trace.Tracer | None = None
_children_follow_parent = False


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


def sample_ratio(env: Mapping[str, str] | None = None) -> float:
    """`STATEWARD_TRACE_SAMPLE_RATIO`: the share of requests (without a sampled caller)
    recorded when `OTEL_TRACES_SAMPLER` names no sampler; 0 to 1, default
    `DEFAULT_SAMPLE_RATIO`. ValueError naming the variable for anything else."""
    text = (env if env is not None else os.environ).get(RATIO_ENV, "").strip()
    if not text:
        return DEFAULT_SAMPLE_RATIO
    try:
        ratio = float(text)
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"{RATIO_ENV}: {text!r} is not a number from 0 to 1")
    return ratio


def default_sampler(env: Mapping[str, str] | None = None) -> Any:
    """The sampler of a provider stateward builds: None (the SDK's own choice) when the
    standard `OTEL_TRACES_SAMPLER` is set, else parent-based with `sample_ratio()` for
    roots, so a caller's sampled (or unsampled) decision is kept and a trace stays whole."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

    e = env if env is not None else os.environ
    if e.get(SAMPLER_ENV, "").strip():
        return None
    ratio = sample_ratio(e)
    return ParentBased(ALWAYS_ON if ratio >= 1.0 else TraceIdRatioBased(ratio))


def make_provider() -> TracerProvider:
    """A provider named by `OTEL_SERVICE_NAME` (default `stateward`) whose sampler is the
    one `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` choose (the SDK reads them) or,
    when they choose none, `default_sampler()` (one root request in ten by default)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    class HashedResource(Resource):
        """The resource with its hash computed once: the OTLP encoder groups every
        exported span by resource, and `Resource.__hash__` serialises the attributes
        to JSON each time (≈ 3 µs of a span's ≈ 15 µs of encoding, issue 17)."""

        _hash: int | None = None

        def __hash__(self) -> int:
            if self._hash is None:
                self._hash = super().__hash__()
            return self._hash

    created = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", SERVICE_NAME)})
    return TracerProvider(
        sampler=default_sampler(),
        resource=HashedResource(created.attributes, created.schema_url),
    )


def install(provider: TracerProvider | None) -> None:
    """Use `provider` for stateward's spans (None: tracing off)."""
    global _provider, _tracer, _children_follow_parent
    _provider = provider
    _tracer = provider.get_tracer("stateward") if provider is not None else None
    _children_follow_parent = provider is not None and _follows_parent(provider.sampler)


def _follows_parent(sampler: Any) -> bool:
    """Whether `sampler` never samples a child of an unsampled span (the `parentbased_*`
    samplers as the standard variables build them): then `span()` and `start()` need not
    ask it for one."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    return isinstance(sampler, ParentBased) and all(
        getattr(sampler, name, None) is ALWAYS_OFF
        for name in ("_local_parent_not_sampled", "_remote_parent_not_sampled")
    )


def _unsampled_parent(parent: Context | None) -> Any:
    """The current (or `parent`'s) span when it is valid and not sampled and the sampler
    follows the parent: a child would not be sampled either, so it is that span (its
    trace id still names the request in errors and logs). None otherwise."""
    if not _children_follow_parent:
        return None
    current = trace.get_current_span(parent)
    if current.is_recording() or not current.get_span_context().is_valid:
        return None
    return current


def provider() -> TracerProvider | None:
    """The installed provider (None while tracing is off)."""
    return _provider


def tracer() -> trace.Tracer | None:
    """stateward's tracer (None while tracing is off)."""
    return _tracer


def enabled() -> bool:
    """Whether spans are recorded."""
    return _tracer is not None


def shutdown() -> None:
    """Flush and stop the installed provider's exporters (at process exit)."""
    if _provider is not None:
        _provider.shutdown()


class _Span:
    """`span()` while tracing is on: the SDK's span, made current without the API's
    generic context-manager layers (`start_as_current_span` / `use_span`), which cost
    ≈ 4 µs of a recorded span's ≈ 20 (issue 17)."""

    __slots__ = ("_attributes", "_name", "_parent", "_span", "_token")

    def __init__(
        self, name: str, parent: Context | None, attributes: Mapping[str, Any] | None
    ) -> None:
        self._name, self._parent, self._attributes = name, parent, attributes

    def __enter__(self) -> Any:
        assert _tracer is not None
        started = self._span = _tracer.start_span(self._name, context=self._parent)
        self._token = otel_context.attach(trace.set_span_in_context(started, self._parent))
        if self._attributes and started.is_recording():
            _set_attributes(started, self._attributes)
        return started

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        started = self._span
        if isinstance(error, Exception) and started.is_recording():
            started.record_exception(error)
            started.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        otel_context.detach(self._token)
        started.end()


class _Off:
    """`span()` while tracing is off: yields None, touches nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _Off()


def span(
    name: str, *, parent: Context | None = None, attributes: Mapping[str, Any] | None = None
) -> AbstractContextManager[Any]:
    """A current span named `name` (None, and nothing else, while tracing is off); an
    exception leaving the block is recorded on it and sets its status to ERROR."""
    if _tracer is None:
        return _OFF
    unsampled = _unsampled_parent(parent)
    if unsampled is not None:
        return nullcontext(unsampled)
    return _Span(name, parent, attributes)


def start(name: str, attributes: Mapping[str, Any] | None = None) -> Any:
    """A span that is NOT made current (end it with `.end()`); None while off."""
    if _tracer is None:
        return None
    unsampled = _unsampled_parent(None)
    if unsampled is not None:
        return unsampled  # its `end()` does nothing
    started = _tracer.start_span(name)
    if attributes and started.is_recording():
        _set_attributes(started, attributes)
    return started


def offer_request_span(started: Any) -> Token[list[Any] | None]:
    """Offer an HTTP request's SERVER span to the GraphQL operation it carries (reset
    with the token when the request ends)."""
    return _request_span.set([started])


def end_request_offer(token: Token[list[Any] | None]) -> None:
    """The request is over: its span is no longer offered."""
    _request_span.reset(token)


def claim_request_span() -> Any:
    """The current HTTP request's SERVER span, the first time it is asked for (None after
    that, over a websocket, or while off): the GraphQL operation of a plain HTTP request
    is recorded on it instead of on a `graphql.operation` span of its own (one span fewer
    per request, issue 17)."""
    offered = _request_span.get()
    return offered.pop() if offered else None


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
