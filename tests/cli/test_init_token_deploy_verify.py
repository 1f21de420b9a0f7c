"""The CLI as scripts use it: keygen -> init -> token -> deploy examples/ -> verify.

Run as real subprocesses of `.venv/bin/stateward`, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from stateward.persistence import create_engine

ROOT = Path(__file__).resolve().parents[2]
STATEWARD = str(Path(sys.executable).parent / "stateward")
EXAMPLES = ROOT / "examples"


def _run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, STATEWARD_NODE_KEY_FILE=str(tmp / "node.key"))
    return subprocess.run(
        [STATEWARD, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=120
    )


def _count_events(url: str) -> int:
    async def count() -> int:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                return int((await conn.execute(text("SELECT count(*) FROM events"))).scalar_one())
        finally:
            await engine.dispose()

    return asyncio.run(count())


def test_keygen_init_token_deploy_verify_round_trip(db_url: str, tmp_path: Path) -> None:
    key = tmp_path / "op.key"
    assert _run(tmp_path, "keygen", "--out", str(key)).returncode == 0

    first = _run(tmp_path, "init", "--db", db_url, "--key-file", str(key))
    assert first.returncode == 0, first.stderr
    events = _count_events(db_url)
    second = _run(tmp_path, "init", "--db", db_url, "--key-file", str(key))
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout  # same `net`
    assert _count_events(db_url) == events == 2  # genesis + trust_node of the node key

    token = _run(tmp_path, "token", "--key-file", str(key), "--db", db_url, "--label", "ci")
    assert token.returncode == 0, token.stderr
    assert len(token.stdout.splitlines()) == 1 and token.stdout.startswith("sw_")

    deployed = _run(tmp_path, "deploy", str(EXAMPLES), "--key-file", str(key), "--db", db_url)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    assert deployed.stdout == ""
    again = _run(tmp_path, "deploy", str(EXAMPLES), "--key-file", str(key), "--db", db_url)
    assert again.returncode == 0 and "unchanged" in again.stderr

    verified = _run(tmp_path, "verify", "--db", db_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout == ""


def test_init_creates_a_missing_key_file(db_url: str, tmp_path: Path) -> None:
    key = tmp_path / "new.key"
    result = _run(tmp_path, "init", "--db", db_url, "--key-file", str(key))
    assert result.returncode == 0, result.stderr
    assert key.exists() and (key.stat().st_mode & 0o777) == 0o600


def test_deploy_without_admin_reports_forbidden(db_url: str, tmp_path: Path) -> None:
    operator, stranger = tmp_path / "op.key", tmp_path / "stranger.key"
    assert _run(tmp_path, "init", "--db", db_url, "--key-file", str(operator)).returncode == 0
    assert _run(tmp_path, "keygen", "--out", str(stranger)).returncode == 0
    result = _run(tmp_path, "deploy", str(EXAMPLES), "--key-file", str(stranger), "--db", db_url)
    assert result.returncode == 1
    assert all(": FORBIDDEN " in line for line in result.stdout.splitlines())


def test_verify_reports_a_tampered_event_and_exits_one(db_url: str, tmp_path: Path) -> None:
    key = tmp_path / "op.key"
    assert _run(tmp_path, "init", "--db", db_url, "--key-file", str(key)).returncode == 0
    assert (
        _run(tmp_path, "deploy", str(EXAMPLES), "--key-file", str(key), "--db", db_url).returncode
        == 0
    )

    async def tamper() -> None:
        engine = create_engine(db_url)
        try:
            async with engine.begin() as conn:
                await conn.execute(
                    text(
                        "UPDATE events SET signature = :s WHERE process_id = 'case-review-registry'"
                    ),
                    {"s": "A" * 86},
                )
        finally:
            await engine.dispose()

    asyncio.run(tamper())
    result = _run(tmp_path, "verify", "--db", db_url)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert "case-review-registry 1 HASH_MISMATCH" in "\n".join(lines)
    assert any(line.startswith("case-review-registry 1 BAD_SIGNATURE") for line in lines)
    one = _run(tmp_path, "verify", "customer-retail-registry", "--db", db_url)
    assert one.returncode == 0, one.stdout


@pytest.mark.parametrize("command", ["verify", "token"])
def test_bad_usage_exits_two(tmp_path: Path, command: str) -> None:
    args = (
        ["--key-file", str(tmp_path / "missing.key")]
        if command == "token"
        else ["--db", "nope://x"]
    )
    assert _run(tmp_path, command, *args).returncode == 2
