"""`stateward migrate` through the command line: `--db` on SQLite and PostgreSQL, and
`--url`/`--token` against a real `stateward serve` process."""

from __future__ import annotations

import asyncio
import copy
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from e2e.harness import ServerProcess

from stateward.cli import main
from stateward.governance.keys import read_key_file
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings

TICKET: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/desk/ticket",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "review": {"label": "Review", "assign": "analyst", "sla_seconds": 100},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "submit": {"from": "intake", "to": "review"},
        "approve": {"from": "review", "to": "done"},
    },
}


def _version_two() -> dict[str, Any]:
    definition = copy.deepcopy(TICKET)
    definition["states"]["check"] = definition["states"].pop("review")
    definition["actions"]["submit"]["to"] = "check"
    definition["actions"]["approve"]["from"] = "check"
    return definition


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _deploy(db_url: str, key: str, root: Path, definition: dict[str, Any]) -> None:
    file = root / f"{definition['$path']}.json"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(definition))
    assert _cli("deploy", str(root), "--key-file", key, "--db", db_url)[0] == 0


def _ticket_in_review(db_url: str, key: str) -> str:
    actor = read_key_file(key).public

    async def go() -> str:
        runtime = await Runtime.open(Settings.from_env(database_url=db_url))
        try:
            pid = (await start_instance(runtime, actor, TICKET["$path"], {})).record.id
            await perform_action(runtime, actor, pid, "submit", {})
            return pid
        finally:
            await runtime.close()

    return asyncio.run(go())


@pytest.fixture
def deployment(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str, str]:
    """(db url, operator key file, a ticket in review on v1 while v2 is deployed)."""
    monkeypatch.setenv("STATEWARD_NODE_KEY_FILE", str(tmp_path / "node.key"))
    key = str(tmp_path / "op.key")
    assert _cli("keygen", "--out", key)[0] == 0
    assert _cli("init", "--db", db_url, "--key-file", key)[0] == 0
    _deploy(db_url, key, tmp_path / "ws", TICKET)
    pid = _ticket_in_review(db_url, key)
    _deploy(db_url, key, tmp_path / "ws", _version_two())
    return db_url, key, pid


def test_migrate_with_db_dry_run_refusal_move_and_verify(deployment: tuple[str, str, str]) -> None:
    db_url, key, pid = deployment
    local = ("--db", db_url, "--key-file", key)
    code, out, _ = _cli("migrate", pid, "--to-version", "2", "--dry-run", *local)
    assert code == 1
    assert json.loads(out[: out.rindex("}") + 1])["problems"][0]["pointer"] == "/stateMap/review"
    code, out, err = _cli("migrate", pid, "--to-version", "2", *local)
    assert code == 1 and out.startswith(f"{pid}: MIGRATION_INVALID #/stateMap/review "), out
    mapping = ("--state-map", '{"review": "check"}')
    code, out, _ = _cli("migrate", pid, "--to-version", "2", *mapping, "--dry-run", *local)
    assert code == 0 and json.loads(out)["toState"] == "check"
    code, out, err = _cli("migrate", pid, "--to-version", "2", *mapping,
                          "--mutate", '{"$set": {"moved": true}}', *local)  # fmt: skip
    assert code == 0, out + err
    plan = json.loads(out)
    assert (plan["fromVersion"], plan["toVersion"], plan["toState"]) == (1, 2, "check")
    assert len(plan["assignmentsCancelled"]) == 1 and plan["assignmentOpened"] == "analyst"
    assert _cli("verify", pid, "--db", db_url)[0] == 0


def test_migrate_bad_usage(deployment: tuple[str, str, str]) -> None:
    db_url, key, pid = deployment
    assert _cli("migrate", pid, "--to-version", "2", "--db", db_url)[0] == 2  # no key file
    assert _cli("migrate", pid, "--to-version", "2", "--url", "http://x/graphql")[0] == 2
    code, _, err = _cli("migrate", pid, "--to-version", "2", "--state-map", "[1]",
                        "--db", db_url, "--key-file", key)  # fmt: skip
    assert code == 2 and "--state-map" in err


@pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)
def test_migrate_with_url_and_token(deployment: tuple[str, str, str], tmp_path: Path) -> None:
    db_url, key, pid = deployment
    code, token, _ = _cli("token", "--db", db_url, "--key-file", key)
    assert code == 0
    env = {"STATEWARD_DATABASE_URL": db_url, "STATEWARD_BUS_URL": "memory://"}
    server = ServerProcess(env=env, cwd=tmp_path).start()
    try:
        remote = ("--url", server.url, "--token", token.strip())
        code, out, _ = _cli("migrate", pid, "--to-version", "2", *remote)
        assert code == 1 and f"{pid}: MIGRATION_INVALID #/stateMap/review" in out
        code, out, _ = _cli("migrate", pid, "--to-version", "2", "--state-map",
                            '{"review": "check"}', *remote)  # fmt: skip
        assert code == 0 and json.loads(out)["toState"] == "check"
        code, _, err = _cli("migrate", pid, "--to-version", "1", "--url", server.url,
                            "--token", "sw_not_a_token")  # fmt: skip
        assert code == 1 and "UNAUTHENTICATED" in err
    finally:
        server.stop()
    assert _cli("verify", pid, "--db", db_url)[0] == 0
