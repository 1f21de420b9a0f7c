"""Every command run on a database `init` never ran on says so (`NOT_INITIALIZED`, "run
stateward init first") and creates nothing: no SQLite file, no genesis (issue 15)."""

from __future__ import annotations

import asyncio
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from sqlalchemy import text

from stateward.cli import main
from stateward.persistence.db import create_engine

HINT = "run stateward init first"


def _cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


@pytest.fixture
def key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STATEWARD_NODE_KEY_FILE", str(tmp_path / "node.key"))
    path = tmp_path / "op.key"
    assert _cli("keygen", "--out", str(path))[0] == 0
    return str(path)


def _commands(db: str, key: str, tmp_path: Path) -> list[list[str]]:
    package = tmp_path / "package.json"
    package.write_text(json.dumps({"format": "stateward.package/1", "workflows": []}))
    flow = tmp_path / "flows" / "acme" / "f.json"
    flow.parent.mkdir(parents=True, exist_ok=True)
    flow.write_text("{}")
    return [
        ["token", "--db", db, "--key-file", key],
        ["deploy", str(tmp_path / "flows"), "--db", db, "--key-file", key],
        ["import", str(package), "--db", db, "--key-file", key],
        ["export", "acme", "--db", db],
        ["verify", "--db", db],
        ["checkpoint", "--db", db],
        ["log", "export", "--db", db, "--out", str(tmp_path / "log.jsonl")],
        ["key", "revoke", "--db", db, "--key-file", key, "x" * 43],
        ["migrate", "some-id", "--to-version", "2", "--db", db, "--key-file", key],
    ]


async def _rows(url: str) -> tuple[int, int]:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            processes = (await connection.execute(text("SELECT count(*) FROM processes"))).scalar()
            events = (await connection.execute(text("SELECT count(*) FROM events"))).scalar()
    finally:
        await engine.dispose()
    return int(processes or 0), int(events or 0)


def test_a_missing_sqlite_file_is_named_and_not_created(key: str, tmp_path: Path) -> None:
    path = tmp_path / "never.db"
    db = f"sqlite+aiosqlite:///{path}"
    for argv in _commands(db, key, tmp_path):
        code, output = _cli(*argv)
        assert code != 0, argv
        assert HINT in output, (argv, output)
        assert not path.exists(), argv


def test_a_schema_without_genesis_is_not_initialised(db_url: str, key: str, tmp_path: Path) -> None:
    """The test database is migrated but has no genesis: still "run stateward init first",
    and nothing is written (no process, no node key registered)."""
    for argv in _commands(db_url, key, tmp_path):
        code, output = _cli(*argv)
        assert code != 0 and HINT in output, (argv, output)
    assert asyncio.run(_rows(db_url)) == (0, 0)
    assert _cli("init", "--db", db_url, "--key-file", key)[0] == 0
    assert _cli("token", "--db", db_url, "--key-file", key)[0] == 0
