"""Settings of a real `stateward serve` process for the client tests."""

from __future__ import annotations

from pathlib import Path


def server_env(tmp_path: Path) -> dict[str, str]:
    """Settings of a fresh node on a SQLite file in `tmp_path` (memory bus)."""
    return {
        "STATEWARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'client.db'}",
        "STATEWARD_BUS_URL": "memory://",
        "STATEWARD_OPERATOR_KEY_FILE": str(tmp_path / "operator.json"),
    }
