"""Prometheus metrics of a node (`prometheus-client`), recorded only while enabled.

`enable()` is called by the server when `STATEWARD_METRICS=1` or `--metrics-port` asks
for them; until then every `record_*` helper returns at once, so instrumented code costs
a function call and a flag test. The metrics live in `prometheus_client`'s default
registry; when `PROMETHEUS_MULTIPROC_DIR` is set (several worker processes behind one
port) values are kept in that directory's memory-mapped files and `exposition()` merges
every process's values (`MultiProcessCollector`); gauges say how they combine.

Label values are bounded: GraphQL operation names beyond `MAX_OPERATION_NAMES` distinct
ones (or not plain identifiers) count as `other`, kernel operations outside the known
set as `unknown`, outcomes are `ok`, `duplicate` or a stable error code.

Open incidents (`stateward_open_incidents{namespace}`) are counted from the database by
the ticker (`record_open_incidents`): every node reads the same rows, so the multi-process
mode is `max`, not a sum.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

ENV = "STATEWARD_METRICS"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
MAX_OPERATION_NAMES = 200
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SWEEP = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0)

GRAPHQL = Histogram(
    "stateward_graphql_operation_duration_seconds",
    "GraphQL operations by type, operation name and outcome (ok or an error code).",
    ["type", "operation", "outcome"],
    buckets=_LATENCY,
)
ACT = Histogram(
    "stateward_act_duration_seconds",
    "Signed events through `act` by kernel operation and outcome (ok, duplicate, a code).",
    ["op", "outcome"],
    buckets=_LATENCY,
)
BATCH = Histogram(
    "stateward_group_commit_batch_size",
    "Events committed per group-commit transaction.",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128),
)
OUTBOX_LAG = Histogram(
    "stateward_outbox_lag_seconds",
    "From an outbox row's transaction to its publication on the bus (path: publish, sweep).",
    ["path"],
    buckets=_LATENCY,
)
REPUBLISHED = Counter(
    "stateward_outbox_republished_total",
    "Outbox rows the relay's sweep republished (left unpublished by a crash or bus outage).",
)
SWEEP = Histogram(
    "stateward_sweep_duration_seconds",
    "Duration of each periodic sweep (sla, timers, automation, stale, webhooks).",
    ["sweep"],
    buckets=_SWEEP,
)
FIRED = Counter(
    "stateward_sweep_fired_total",
    "What the periodic sweeps fired (sla_warning, sla_breach, timer, automation, stale).",
    ["kind"],
)
HOOKS = Histogram(
    "stateward_hook_duration_seconds",
    "Starlark hook runs by outcome (ok or the HOOK_* code).",
    ["outcome"],
    buckets=_LATENCY,
)
WEBHOOKS = Counter(
    "stateward_webhook_deliveries_total",
    "Webhook delivery attempts by HTTP status (or `error` when no response came).",
    ["status"],
)
SUBSCRIBERS = Gauge(
    "stateward_subscribers",
    "Live subscriptions served by this node.",
    multiprocess_mode="livesum",
)
QUEUE_DEPTH = Gauge(
    "stateward_queue_depth",
    "Items waiting: subscribers (all subscriber queues), group_commit (events to apply).",
    ["queue"],
    multiprocess_mode="livesum",
)
DB_POOL = Gauge(
    "stateward_db_pool_connections",
    "Database pool connections by state (checked_out, idle, overflow).",
    ["state"],
    multiprocess_mode="livesum",
)
OPEN_INCIDENTS = Gauge(
    "stateward_open_incidents",
    "Open incidents (failures that stopped an instance) by namespace, read from the database.",
    ["namespace"],
    multiprocess_mode="max",
)

_on = False
_incident_namespaces: set[str] = set()
_operation_names: set[str] = set()
_children: dict[tuple[Any, tuple[str, ...]], Any] = {}


def env_enabled(env: dict[str, str] | None = None) -> bool:
    """True when `STATEWARD_METRICS` asks for metrics (1, true, yes, on)."""
    value = (env if env is not None else os.environ).get(ENV, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def enable(on: bool = True) -> None:
    """Start (or stop) recording."""
    global _on
    _on = on


def enabled() -> bool:
    """Whether the helpers record."""
    return _on


def operation_label(name: str | None) -> str:
    """A bounded label for a GraphQL operation name."""
    if not name:
        return "anonymous"
    if name in _operation_names:
        return name
    if not _NAME.match(name) or len(_operation_names) >= MAX_OPERATION_NAMES:
        return "other"
    _operation_names.add(name)
    return name


def _child(metric: Any, labels: tuple[str, ...]) -> Any:
    """`metric.labels(*labels)`, bound once: `labels()` validates, locks and looks the
    child up on every call (the label sets are bounded, see the module docstring)."""
    key = (metric, labels)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*labels)
    return child


def record_graphql(kind: str, name: str | None, outcome: str, seconds: float) -> None:
    """One GraphQL operation finished."""
    if _on:
        _child(GRAPHQL, (kind, operation_label(name), outcome)).observe(seconds)


def record_act(op: str, outcome: str, seconds: float) -> None:
    """One `act` call finished."""
    if _on:
        _child(ACT, (op, outcome)).observe(seconds)


def record_batch(size: int) -> None:
    """One group-commit transaction committed `size` events."""
    if _on:
        BATCH.observe(size)


def record_published(created: Iterable[datetime], path: str = "publish") -> None:
    """Outbox rows (their `created_at`) reached the bus now."""
    if not _on:
        return
    now = datetime.now(UTC)
    lag = _child(OUTBOX_LAG, (path,))
    for at in created:
        lag.observe(max(0.0, (now - at).total_seconds()))


def record_republished(count: int) -> None:
    """The relay's sweep republished `count` rows left unpublished (crash recovery)."""
    if _on and count:
        REPUBLISHED.inc(count)


def record_fired(kind: str, count: int) -> None:
    """A sweep fired `count` things of `kind`."""
    if _on and count:
        FIRED.labels(kind).inc(count)


def record_hook(outcome: str, seconds: float) -> None:
    """One hook run ended with `outcome`."""
    if _on:
        _child(HOOKS, (outcome,)).observe(seconds)


def record_webhook(status: int | None) -> None:
    """One webhook delivery attempt got HTTP `status` (None: no response)."""
    if _on:
        WEBHOOKS.labels(str(status) if status is not None else "error").inc()


@contextmanager
def sweep_timer(name: str) -> Iterator[None]:
    """Time one sweep of the ticker."""
    if not _on:
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        SWEEP.labels(name).observe(time.perf_counter() - started)


def record_open_incidents(counts: dict[str, int]) -> None:
    """Set the open-incidents gauge: `counts` by namespace; namespaces seen before and
    absent now go to 0 (their incidents were resolved)."""
    if not _on:
        return
    for namespace in _incident_namespaces - set(counts):
        OPEN_INCIDENTS.labels(namespace).set(0)
    for namespace, n in counts.items():
        OPEN_INCIDENTS.labels(namespace).set(n)
    _incident_namespaces.update(counts)


def sample(services: Any) -> None:
    """Set the gauges from a node's live objects (subscribers, queues, the DB pool)."""
    if not _on:
        return
    bus = getattr(services, "bus", None)
    fanout = getattr(bus, "fanout", None)
    if fanout is not None:
        SUBSCRIBERS.set(len(fanout))
        QUEUE_DEPTH.labels("subscribers").set(fanout.pending())
    runtime = getattr(services, "_runtime", None)
    committer = getattr(runtime, "committer", None)
    QUEUE_DEPTH.labels("group_commit").set(getattr(committer, "queued", 0))
    pool = getattr(getattr(runtime, "engine", None), "pool", None)
    for state, method in (("checked_out", "checkedout"), ("idle", "checkedin")):
        reader = getattr(pool, method, None)
        if reader is not None:
            DB_POOL.labels(state).set(reader())
    overflow = getattr(pool, "overflow", None)
    if overflow is not None:
        DB_POOL.labels("overflow").set(max(0, overflow()))


def registry() -> CollectorRegistry:
    """The registry to expose: every process's values in multi-process mode."""
    if os.environ.get(MULTIPROC_ENV):
        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
        return merged
    return REGISTRY


def exposition() -> bytes:
    """The text exposition format of `registry()`."""
    return generate_latest(registry())


def process_exited(pid: int | None = None) -> None:
    """In multi-process mode, drop the live gauges of a stopped worker."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(pid or os.getpid())  # type: ignore[no-untyped-call]
