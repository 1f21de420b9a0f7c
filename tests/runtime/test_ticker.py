"""The periodic loop: one `tick` runs every sweep; `Ticker` runs ticks until stopped."""

from __future__ import annotations

import asyncio

from kernel_fixtures import TICKET, TIMED, Desk

from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.ticker import Ticker, tick


async def test_one_tick_runs_the_sla_scan_the_timers_and_the_staleness_sweep(admin_rt, operator):
    desk = await Desk(admin_rt, operator).setup(TICKET, TIMED)
    ticket = await desk.ticket_in_review()
    timed = (await start_instance(admin_rt, desk.admin, TIMED["$path"], {})).record.id
    await perform_action(admin_rt, desk.admin, timed, "arm", {})
    admin_rt.clock.advance(admin_rt.settings.stale_after + 1)
    report = await tick(admin_rt)
    assert (report.sla.warnings, report.sla.breaches) == ([ticket], [ticket])
    assert len(report.timers.fired) == 1
    assert report.stale == [ticket]  # the timed instance just had its `$timer` event
    assert report.errors == {}
    again = await tick(admin_rt)
    assert (again.sla.fired, again.timers.fired, again.stale) == (0, [], [])


async def test_the_ticker_ticks_every_interval_until_stopped(admin_rt, operator):
    desk = await Desk(admin_rt, operator).setup()
    ticket = await desk.ticket_in_review()
    admin_rt.clock.advance(500)
    ticker = Ticker(admin_rt, interval=0.05)
    ticker.start()
    ticker.start()  # idempotent
    for _ in range(200):
        if ticker.ticks >= 3:
            break
        await asyncio.sleep(0.02)
    await ticker.stop()
    assert not ticker.running and ticker.ticks >= 3
    assert (await desk.process(ticket)).sla_breached_at is not None
