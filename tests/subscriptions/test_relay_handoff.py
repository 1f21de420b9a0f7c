"""Rows written by a process without a bus (the CLI) are the relays' to publish: the
sweep publishes them without calling it crash recovery. Rows a node with a bus left
unpublished still are recovery, logged as such.

Before this, every `stateward init/deploy/import` run made the next sweep of a running
node log "relay republished N outbox row(s) left unpublished" although nothing crashed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from stateward.governance.keys import generate_keypair
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings
from stateward.subscriptions.bus import EventBus
from stateward.subscriptions.relay import OutboxRelay

RECOVERY_LINE = "left unpublished"


@pytest.fixture
async def runtime(db_url: str) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    yield rt
    await rt.close()


async def _commit(runtime: Runtime, count: int, age: float) -> list[dict[str, Any]]:
    created = datetime.now(UTC) - timedelta(seconds=age)
    async with runtime.uow() as uow:
        rows = [
            uow.outbox.stage("workflow.updated", {"namespace": "acme"}, created)
            for _ in range(count)
        ]
        await uow.commit()
    return [r.sequenced().message() for r in rows]


async def test_rows_of_a_tool_without_a_bus_are_published_quietly(
    db_url: str, runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    bus = EventBus("memory://")
    relay = OutboxRelay(runtime, bus, sweep_interval=3600, grace=5)
    await relay.start()
    await bus.start()
    sub = bus.subscribe()
    tool = await Runtime.open(Settings(database_url=db_url), node_key=generate_keypair())
    try:
        assert tool.publishers == []  # like every CLI command's runtime
        await tool.publish(await _commit(tool, 3, age=60))  # what `act` does after commit
    finally:
        await tool.close()
    try:
        with caplog.at_level(logging.INFO, logger="stateward.subscriptions.relay"):
            assert await relay.sweep() == 3
        async with asyncio.timeout(5):
            assert len([await anext(sub) for _ in range(3)]) == 3
        assert relay.republished == 0
        assert RECOVERY_LINE not in caplog.text
    finally:
        await relay.stop()
        await bus.stop()


async def test_rows_a_crashed_node_left_are_still_reported_as_recovery(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    async def crashed(messages: Any) -> None:
        raise RuntimeError("the node died before publishing")

    runtime.publishers.append(crashed)  # a node WITH a bus that never got to publish
    await runtime.publish(await _commit(runtime, 2, age=60))
    runtime.publishers.remove(crashed)
    bus = EventBus("memory://")
    relay = OutboxRelay(runtime, bus, sweep_interval=3600, grace=5)
    await relay.start()
    await bus.start()
    try:
        with caplog.at_level(logging.INFO, logger="stateward.subscriptions.relay"):
            assert await relay.sweep() == 2
        assert relay.republished == 2
        assert "relay republished 2 outbox row(s) left unpublished" in caplog.text
    finally:
        await relay.stop()
        await bus.stop()
