"""Sweeps: what time makes happen. SLA warnings and breaches (`sla`), timers
(`scheduler`), staleness (`staleness`), notifications and webhook deliveries
(`notifications`, `webhooks`). Each exposes a sweep that `runtime.ticker` runs.

May use the runtime core only.
"""
