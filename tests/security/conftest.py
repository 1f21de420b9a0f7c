"""Fixtures for the attack tests: the real app in process and real `stateward serve` processes.

- `api` (from tests/api/graph_stack.py): the real app, schema, runtime and database
  (SQLite, and PostgreSQL when configured) behind an httpx client (ASGI transport).
- `server_factory(**env)`: starts `stateward serve` (tests/e2e/harness.py) on a fresh SQLite
  file with extra STATEWARD_* variables; every process is stopped after the test.
- `server`: one such process with the defaults.
- `ws_url`: the `api` app served by uvicorn in this test's loop with the options
  `stateward serve` uses (`uvicorn_options`: ws_max_size, no proxy headers).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import uvicorn

from stateward.commands.serve import uvicorn_options

_TESTS = Path(__file__).resolve().parent.parent
for _helpers in ("api", "e2e"):
    if str(_TESTS / _helpers) not in sys.path:
        sys.path.insert(0, str(_TESTS / _helpers))

from graph_stack import Api, api  # noqa: E402, F401  (re-exported fixture)
from harness import ServerProcess  # noqa: E402


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start `stateward serve` processes with extra environment; all stopped afterwards."""
    started: list[ServerProcess] = []

    def start(db_url: str | None = None, **env: str) -> ServerProcess:
        n = len(started)
        base = {
            "STATEWARD_DATABASE_URL": db_url or f"sqlite+aiosqlite:///{tmp_path / f's{n}.db'}",
            "STATEWARD_BUS_URL": "memory://",
            "STATEWARD_OPERATOR_KEY_FILE": str(tmp_path / "operator.json"),
            "STATEWARD_SCAN_INTERVAL": "0.5",
        }
        proc = ServerProcess(env={**base, **env}, cwd=tmp_path).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    """A `stateward serve` process on a fresh SQLite file (memory bus, loopback port)."""
    return server_factory()


@pytest.fixture
async def ws_url(api: Api) -> AsyncIterator[str]:  # noqa: F811  (the fixture)
    """The `api` app behind a real uvicorn (serve's options) on a free loopback port."""
    options = {**uvicorn_options(api.app.state.settings), "port": 0, "lifespan": "off"}
    server = uvicorn.Server(uvicorn.Config(api.app, **options))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"ws://127.0.0.1:{port}/graphql"
    server.should_exit = True
    await task
