"""Per-request facts that logs, error extensions and spans share (context variables).

The HTTP middleware sets the request id, the GraphQL extension the operation and the
actor; `current()` reads them together with the active trace and span ids.
"""

from __future__ import annotations

import random
import re
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace

request_id: ContextVar[str | None] = ContextVar("stateward_request_id", default=None)
operation: ContextVar[str | None] = ContextVar("stateward_operation", default=None)
actor: ContextVar[str | None] = ContextVar("stateward_actor", default=None)

#: A caller's `X-Request-ID` is kept only when it is short and plain (it goes into logs).
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def new_request_id(offered: str | None = None) -> str:
    """The caller's request id when it is safe to log, else a fresh random one (32 hex
    digits; an id to correlate lines, not a secret: no system call for it)."""
    if offered and _SAFE_ID.match(offered):
        return offered
    return f"{random.getrandbits(128):032x}"


def trace_ids() -> tuple[str | None, str | None]:
    """(trace id, span id) of the active span as hex, or (None, None) when not tracing."""
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None, None
    return trace.format_trace_id(span_context.trace_id), trace.format_span_id(span_context.span_id)


def current() -> dict[str, Any]:
    """The request facts known here: request_id, trace_id, span_id, actor, operation."""
    trace_id, span_id = trace_ids()
    facts = {
        "request_id": request_id.get(),
        "trace_id": trace_id,
        "span_id": span_id,
        "actor": actor.get(),
        "operation": operation.get(),
    }
    return {k: v for k, v in facts.items() if v is not None}
