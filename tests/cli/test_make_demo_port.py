"""`make demo PORT=8001` serves on that port (through STATEWARD_PORT, like the README says)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_passes_port_as_stateward_port() -> None:
    dry = subprocess.run(
        ["make", "-n", "demo", "PORT=8001"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "STATEWARD_PORT=8001 .venv/bin/stateward serve --demo" in dry.stdout
    plain = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True)
    assert "STATEWARD_PORT" not in plain.stdout


def test_serve_runs_on_uvloop() -> None:
    import uvloop

    from stateward.commands.serve import loop_factory

    assert loop_factory() is uvloop.new_event_loop
