"""`stateward publish` on the database (issue 15), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stateward.cli import main

LEAD: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/sales/lead",
    "initial": "new",
    "start": {"message": "lead"},
    "states": {"new": {"label": "New"}, "won": {"label": "Won", "terminal": True}},
    "actions": {"win": {"from": "new", "to": "won"}},
}


@pytest.fixture
def deployed(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv("STATEWARD_NODE_KEY_FILE", str(tmp_path / "node.key"))
    key = str(tmp_path / "op.key")
    assert main(["keygen", "--out", key]) == 0
    assert main(["init", "--db", db_url, "--key-file", key]) == 0
    file = tmp_path / "ws" / "acme/sales/lead.json"
    file.parent.mkdir(parents=True)
    file.write_text(json.dumps(LEAD))
    assert main(["deploy", str(tmp_path / "ws"), "--key-file", key, "--db", db_url]) == 0
    return db_url, key


def test_publish_starts_the_workflow_once_per_message_id(deployed, capsys) -> None:
    db_url, key = deployed
    argv = ["publish", "lead", "--namespace", "acme/sales", "--key", "web", "--db", db_url,
            "--key-file", key, "--payload", '{"source": "web"}', "--message-id", "L-1"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert len(first["started"]) == 1 and first["duplicate"] is False
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["started"] == first["started"] and again["duplicate"] is True


def test_publish_refusals_and_bad_usage(deployed, capsys) -> None:
    db_url, key = deployed
    base = ["publish", "lead", "--namespace", "acme/sales", "--key", "k"]
    assert main([*base, "--db", db_url, "--key-file", key, "--ttl", "-1"]) == 1
    assert "INVALID_INPUT" in capsys.readouterr().err
    assert main([*base, "--db", db_url, "--key-file", key, "--payload", "{bad"]) == 2
    assert main([*base, "--db", db_url]) == 2  # no key file: who publishes?
    assert main([*base, "--url", "http://127.0.0.1:9", "--db", db_url]) == 2
