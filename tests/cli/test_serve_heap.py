"""`serve` freezes its startup heap once ready, so full collections skip it (issue 18)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from stateward.commands import serve as serve_command
from stateward.settings import Settings


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Give the test process's frozen objects back to the collector afterwards, and its
    thresholds."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class _Node:
    """A cyclic object the collector (not reference counting) must free."""

    def __init__(self) -> None:
        self.me = self


def test_freeze_heap_puts_the_live_heap_out_of_the_collectors_reach(unfrozen: None) -> None:
    before = _Node()
    probe = weakref.ref(before)
    serve_command.freeze_heap()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == serve_command.SERVER_GC_THRESHOLDS
    del before
    gc.collect()
    assert probe() is not None  # frozen: full collections no longer walk it
    gc.unfreeze()
    gc.collect()
    assert probe() is None


async def test_serve_freezes_its_heap_before_it_says_ready(
    tmp_path: Path, unfrozen: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATEWARD_OPERATOR_KEY_FILE", str(tmp_path / "operator.key"))
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
        node_key_file=str(tmp_path / "node.key"),
        port=0,
    )
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve_command.serve(settings, on_ready=lambda url: ready.set_result(gc.get_freeze_count()))
    )
    try:
        frozen = await asyncio.wait_for(ready, timeout=60)
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
    assert frozen > 10_000  # the modules, the schema and the runtime, not a handful
