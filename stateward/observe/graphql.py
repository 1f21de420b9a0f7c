"""`Telemetry`: the Strawberry schema extension that observes every GraphQL operation.

Per operation it records the `stateward_graphql_operation_duration_seconds` histogram
(type, name, outcome: `ok` or the first error's `extensions.code`), spans for the
operation (over HTTP the request's SERVER span, with `graphql.operation.name`, `.type`
and `stateward.outcome`; over a websocket a `graphql.operation` span) and its parse,
validate and execute steps, sets the operation and actor for
log lines, adds `requestId` (and `traceId` while tracing) to every error's `extensions`,
and logs one line per operation (`graphql mutation startInstance: ok in 3.1 ms`).

It must run after the error policy has rewritten the errors: it is listed before it, and
Strawberry runs the end of the operation hooks in reverse order.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from strawberry.extensions import SchemaExtension

from stateward.observe import context, metrics, tracing

log = logging.getLogger("stateward.graphql")


def _operation(execution_context: Any) -> tuple[str, str | None]:
    try:
        kind = execution_context.operation_type.value
    except Exception:  # the document did not parse
        kind = "unknown"
    return str(kind), execution_context.operation_name


def _outcome(errors: Any) -> str:
    if not errors:
        return "ok"
    code = (errors[0].extensions or {}).get("code")
    return str(code) if code else "error"


def _log_line(kind: str, name: str | None, outcome: str, seconds: float) -> None:
    """The operation's line (`graphql mutation startInstance: ok in 3.1 ms`), made as
    `log.info` makes it but without looking up the caller's frame (the record names this
    function): it is logged once per request (issue 18 `req18`)."""
    message = f"graphql {kind} {name or '(anonymous)'}: {outcome} in {seconds * 1e3:.1f} ms"
    extra = {"operation": name} if name else None
    log.handle(
        log.makeRecord(
            log.name, logging.INFO, __file__, _LINE, message, (), None, "_log_line", extra
        )
    )


_LINE = _log_line.__code__.co_firstlineno


class Telemetry(SchemaExtension):
    """Metrics, spans, log facts and error extensions per operation (module docstring)."""

    def on_operation(self) -> Iterator[None]:
        """Time the operation, then record what came of it."""
        ec = self.execution_context
        started = time.perf_counter()
        viewer = getattr(ec.context, "viewer", None)
        actor_token = context.actor.set(getattr(viewer, "actor", None))
        name_token = context.operation.set(ec.operation_name)
        # Over HTTP the request's SERVER span is the operation's (one span fewer);
        # over a websocket each operation has a `graphql.operation` span of its own.
        self._span = request = tracing.claim_request_span()
        if request is None:
            self._span = tracing.start("graphql.operation")
        self._parent = tracing.context_of(self._span)
        try:
            yield
        finally:
            seconds = time.perf_counter() - started
            kind, name = _operation(ec)
            result = getattr(ec, "result", None)
            errors = getattr(result, "errors", None)
            outcome = _outcome(errors)
            metrics.record_graphql(kind, name, outcome, seconds)
            if errors:
                self._annotate(errors)
            if log.isEnabledFor(logging.INFO):
                _log_line(kind, name, outcome, seconds)
            if self._span is not None:
                if self._span.is_recording():
                    if name:  # known once the document is parsed
                        self._span.set_attribute("graphql.operation.name", name)
                    self._span.set_attribute("graphql.operation.type", kind)
                    self._span.set_attribute("stateward.outcome", outcome)
                if request is None:
                    self._span.end()  # the request's span ends with the request
            for var, token in ((context.actor, actor_token), (context.operation, name_token)):
                with contextlib.suppress(ValueError):  # resumed elsewhere (subscriptions)
                    var.reset(token)

    def _annotate(self, errors: Any) -> None:
        """requestId and traceId into every error's extensions."""
        request_id = context.request_id.get()
        trace_id = None
        if self._span is not None:
            trace_id = f"{self._span.get_span_context().trace_id:032x}"
        for error in errors:
            extensions = error.extensions if error.extensions is not None else {}
            if request_id:
                extensions.setdefault("requestId", request_id)
            if trace_id:
                extensions.setdefault("traceId", trace_id)
            error.extensions = extensions

    def on_parse(self) -> Iterator[None]:
        """A span around parsing."""
        with tracing.span("graphql.parse", parent=self._parent):
            yield

    def on_validate(self) -> Iterator[None]:
        """A span around validation."""
        with tracing.span("graphql.validate", parent=self._parent):
            yield

    def on_execute(self) -> Iterator[None]:
        """A span around execution (the resolvers' spans, e.g. `act`, are its children)."""
        token = context.operation.set(self.execution_context.operation_name)
        try:
            with tracing.span("graphql.execute", parent=self._parent):
                yield
        finally:
            with contextlib.suppress(ValueError):
                context.operation.reset(token)
