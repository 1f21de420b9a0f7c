"""`stateward incidents` and `stateward retry` through the command line: `--db` on SQLite
and PostgreSQL, and `--url`/`--token` against a real `stateward serve` process (which runs
the hook again when retried)."""

from __future__ import annotations

import asyncio
import io
import json
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from e2e.harness import ServerProcess

from stateward.cli import main
from stateward.governance.keys import read_key_file
from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.ops_support import system_act
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings

NS = "acme/ops"
PATH = f"{NS}/claim"
FIXED = "def check(ctx):\n    return {'checked': True}\n"
FLOW: dict[str, Any] = {
    "$version": "2.0",
    "$path": PATH,
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "checking": {"label": "Checking", "audience": "system", "hook": "checks:check"},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {"submit": {"from": "intake", "to": "checking"},
                "pass": {"from": "checking", "to": "done"}},
}  # fmt: skip


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _failed_instances(db_url: str, key: str, n: int) -> list[str]:
    """`n` instances stopped by a recorded hook failure (no hook runs in this process)."""
    signer = read_key_file(key)

    async def go() -> list[str]:
        runtime = await Runtime.open(Settings.from_env(database_url=db_url))
        try:
            await registry.add_module(runtime, signer, NS, "checks", FIXED)
            await registry.deploy_workflow(runtime, signer, FLOW)
            pids = []
            for _ in range(n):
                pid = (await start_instance(runtime, signer.public, PATH, {})).record.id
                await perform_action(runtime, signer.public, pid, "submit", {})
                input = {"hook": "checks:check", "after": 2, "code": "HOOK_FAILED",
                         "error": "HOOK_FAILED: upstream down"}  # fmt: skip
                await system_act(runtime, pid, PATH, "$automate", input)
                pids.append(pid)
            return pids
        finally:
            await runtime.close()

    return asyncio.run(go())


@pytest.fixture
def deployment(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str, list[str]]:
    """(db url, operator key file, two instances in error with an open incident each)."""
    monkeypatch.setenv("STATEWARD_NODE_KEY_FILE", str(tmp_path / "node.key"))
    key = str(tmp_path / "op.key")
    assert _cli("keygen", "--out", key)[0] == 0
    assert _cli("init", "--db", db_url, "--key-file", key)[0] == 0
    return db_url, key, _failed_instances(db_url, key, 2)


def _listed(out: str) -> list[dict[str, Any]]:
    return json.loads(out)  # type: ignore[no-any-return]


def test_incidents_and_retry_with_db(deployment: tuple[str, str, list[str]]) -> None:
    db_url, key, pids = deployment
    local = ("--db", db_url, "--key-file", key)
    code, out, err = _cli("incidents", "--open", "--json", *local)
    assert code == 0, err
    items = _listed(out)
    assert sorted(i["instanceId"] for i in items) == sorted(pids)
    assert {i["kind"] for i in items} == {"HOOK_FAILED"}
    code, out, _ = _cli("incidents", "--namespace", NS, *local)
    assert code == 0 and len(out.splitlines()) == 2 and "attempts=1 open" in out
    first, second = items
    code, out, err = _cli("retry", first["incidentId"], *local)
    assert code == 0, err
    done = json.loads(out)
    # no hook runs in a CLI process: the instance is active again, the incident open
    assert (done["instanceStatus"], done["resolved"]) == ("active", False)
    code, out, err = _cli("retry", second["incidentId"], "--resolve", "$cancel", *local)
    assert code == 0, err
    assert json.loads(out)["resolution"] == "cancelled"
    code, _, err = _cli("retry", second["incidentId"], *local)
    assert code == 1 and "CONFLICT" in err
    assert _cli("verify", first["instanceId"], "--db", db_url)[0] == 0
    assert _cli("verify", second["instanceId"], "--db", db_url)[0] == 0


def test_bad_usage(deployment: tuple[str, str, list[str]], tmp_path: Path) -> None:
    db_url, key, _ = deployment
    assert _cli("incidents", "--db", db_url)[0] == 2  # no key file
    assert _cli("incidents", "--open", "--resolved", "--db", db_url, "--key-file", key)[0] == 2
    assert _cli("incidents", "--first", "1000", "--db", db_url, "--key-file", key)[0] == 2
    assert _cli("retry", "x", "--input", "{}", "--db", db_url, "--key-file", key)[0] == 2
    assert _cli("retry", "x", "--url", "http://x/graphql")[0] == 2
    code, _, err = _cli("retry", "nope", "--db", db_url, "--key-file", key)
    assert code == 1 and "NOT_FOUND" in err
    stranger = str(tmp_path / "stranger.key")
    assert _cli("keygen", "--out", stranger)[0] == 0
    code, out, _ = _cli("incidents", "--json", "--db", db_url, "--key-file", stranger)
    assert code == 0 and _listed(out) == []


@pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)
def test_incidents_and_retry_with_url_and_token(
    deployment: tuple[str, str, list[str]], tmp_path: Path
) -> None:
    db_url, key, pids = deployment
    code, token, _ = _cli("token", "--db", db_url, "--key-file", key)
    assert code == 0
    env = {"STATEWARD_DATABASE_URL": db_url, "STATEWARD_BUS_URL": "memory://"}
    server = ServerProcess(env=env, cwd=tmp_path).start()
    try:
        remote = ("--url", server.url, "--token", token.strip())
        code, out, err = _cli("incidents", "--json", "--instance", pids[0], *remote)
        assert code == 0, err
        [incident] = _listed(out)
        code, out, err = _cli("retry", incident["incidentId"], *remote)
        assert code == 0, err
        # the server runs the (working) hook again: the instance goes on
        deadline = time.monotonic() + 30
        while True:
            code, out, _ = _cli("incidents", "--json", "--instance", pids[0], *remote)
            [now] = _listed(out)
            if now["resolved"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert now["resolution"] == "retried"
        code, _, err = _cli("retry", incident["incidentId"], "--url", server.url,
                            "--token", "sw_not_a_token")  # fmt: skip
        assert code == 1 and "UNAUTHENTICATED" in err
    finally:
        server.stop()
    assert _cli("verify", pids[0], "--db", db_url)[0] == 0
