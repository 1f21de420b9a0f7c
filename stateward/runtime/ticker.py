"""The periodic loop of a node (DESIGN §7): SLA scan, timers, automation recovery,
staleness, webhooks.

`tick(runtime, now)` runs one round of every sweep (tests call it with a `ManualClock`);
`Ticker(runtime)` runs `tick` every `settings.scan_interval` seconds in a background task
(started and stopped from the app lifespan). Every sweep is safe to run on several nodes
at once: each SLA mark, timer, stale marking and recovered automation fires exactly once
across them. A failing sweep is logged and does not stop the others or the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stateward.observe import metrics, tracing
from stateward.runtime.core.services import Runtime
from stateward.runtime.hooks import automation
from stateward.runtime.messages import correlate
from stateward.runtime.operate import incidents
from stateward.runtime.sweeps import scheduler, sla, staleness, webhooks

log = logging.getLogger(__name__)


@dataclass
class TickReport:
    """What one tick did (what THIS node fired), and which sweeps failed."""

    sla: sla.SlaReport = field(default_factory=sla.SlaReport)
    timers: scheduler.TimerReport = field(default_factory=scheduler.TimerReport)
    automations: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    deliveries: list[webhooks.Attempt] = field(default_factory=list)
    messages: list[int] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


async def _guard(report: TickReport, name: str, step: Callable[[], Awaitable[Any]]) -> Any:
    try:
        with metrics.sweep_timer(name), tracing.span(f"sweep.{name}"):
            return await step()
    except Exception as error:  # one sweep's failure must not stop the others
        log.exception("tick: %s failed", name)
        report.errors[name] = f"{type(error).__name__}: {error}"
        return None


async def tick(runtime: Runtime, now: datetime | None = None) -> TickReport:
    """One round: SLA warnings/breaches, due timers, automation lost to a crash (re-run),
    staleness, webhook deliveries, message deliveries left pending."""
    now = now or runtime.clock.now()
    report = TickReport()
    found = await _guard(report, "sla", lambda: sla.scan(runtime, now))
    if found is not None:
        report.sla = found
    timers = await _guard(report, "timers", lambda: scheduler.fire_due(runtime, now))
    if timers is not None:
        report.timers = timers
    report.automations = (
        await _guard(report, "automation", lambda: automation.recover(runtime, now)) or []
    )
    report.stale = await _guard(report, "stale", lambda: staleness.sweep(runtime, now)) or []
    report.deliveries = (
        await _guard(report, "webhooks", lambda: webhooks.deliver_due(runtime, now)) or []
    )
    report.messages = (
        await _guard(report, "messages", lambda: correlate.deliver_pending(runtime, now)) or []
    )
    if metrics.enabled():
        counts = await _guard(report, "incidents", lambda: incidents.open_counts(runtime))
        if counts is not None:
            metrics.record_open_incidents(counts)
    _count(report)
    return report


def _count(report: TickReport) -> None:
    """What this tick fired, into the sweep metrics."""
    metrics.record_fired("sla_warning", len(report.sla.warnings))
    metrics.record_fired("sla_breach", len(report.sla.breaches))
    metrics.record_fired("timer", len(report.timers.fired))
    metrics.record_fired("automation", len(report.automations))
    metrics.record_fired("stale", len(report.stale))
    for attempt in report.deliveries:
        metrics.record_webhook(attempt.status_code)


class Ticker:
    """Runs `tick` every `settings.scan_interval` seconds until stopped."""

    def __init__(self, runtime: Runtime, interval: float | None = None) -> None:
        self.runtime = runtime
        self.interval = interval if interval is not None else runtime.settings.scan_interval
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    @property
    def running(self) -> bool:
        """True while the loop runs."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the loop in a background task (idempotent)."""
        if self.running:
            return
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="stateward-ticker")

    async def stop(self) -> None:
        """Stop the loop and wait for the current tick to finish."""
        self._stopping.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                await asyncio.wait_for(task, timeout=max(30.0, self.interval * 2))
            except TimeoutError:
                task.cancel()

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                await tick(self.runtime)
            except Exception:  # never let the loop die
                log.exception("tick failed")
            self.ticks += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=self.interval)
