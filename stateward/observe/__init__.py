"""Observability of a node: Prometheus metrics, OpenTelemetry traces, structured logs,
CLI progress bars.

Everything here is a thin layer over the ecosystem's libraries (`prometheus-client`, the
OpenTelemetry SDK and its SQLAlchemy instrumentation, `python-json-logger`, `rich`); the
HTTP server span is ours (`http.ServerSpanMiddleware`: OpenTelemetry's ASGI middleware
cost ≈ 80 µs per request, sampled or not).
The rest of stateward calls small functions at its seams (`metrics.act_finished(...)`,
`tracing.span("act.commit")`, ...); each is a cheap no-op while its feature is off.

This package imports nothing else from stateward (every layer may use it), and it never
records tokens, secrets or instance data: labels and attributes are operation names,
kernel operations, outcome codes and ids.
"""
