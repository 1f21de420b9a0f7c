"""A real `stateward serve` process for the client tests (see tests/e2e/harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from client_server import server_env
from e2e.harness import ServerProcess


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A running server on a fresh database; its operator key is `tmp_path/operator.json`."""
    proc = ServerProcess(env=server_env(tmp_path), cwd=tmp_path).start()
    yield proc
    proc.stop()
