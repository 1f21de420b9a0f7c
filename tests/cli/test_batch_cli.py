"""`stateward batch` on the database (issue 15), on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from e2e.harness import ServerProcess
from test_publish_cli import LEAD, deployed  # noqa: F401  (the fixture)

from stateward.cli import main

FILTER = json.dumps({"workflow": LEAD["$path"], "status": ["ACTIVE"]})


def _leads(db_url: str, key: str, n: int) -> None:
    for i in range(n):
        argv = ["publish", "lead", "--namespace", "acme/sales", "--key", "k", "--db", db_url,
                "--key-file", key, "--message-id", f"lead-{i}"]  # fmt: skip
        assert main(argv) == 0


def test_batch_cancel_waits_and_reports(deployed, capsys) -> None:  # noqa: F811
    db_url, key = deployed
    _leads(db_url, key, 3)
    capsys.readouterr()
    base = ["--db", db_url, "--key-file", key]
    assert main(["batch", "cancel", "--filter", FILTER, "--reason", "spam", *base]) == 0
    done = json.loads(capsys.readouterr().out)
    assert (done["kind"], done["status"], done["total"], done["succeeded"]) == (
        "cancel", "completed", 3, 3
    )  # fmt: skip
    assert done["params"] == {"reason": "spam"}
    assert main(["batch", "status", done["id"], *base]) == 0
    assert json.loads(capsys.readouterr().out)["succeeded"] == 3
    every = json.dumps({"workflow": LEAD["$path"]})
    assert main(["batch", "action", "--filter", every, "--action", "win", *base]) == 1
    failed = json.loads(capsys.readouterr().out)
    assert failed["failed"] == 3
    assert {e["code"] for e in failed["errors"]} == {"INACTIVE_PROCESS"}


def test_batch_bad_usage(deployed) -> None:  # noqa: F811
    db_url, key = deployed
    base = ["--db", db_url, "--key-file", key]
    assert main(["batch", "cancel", *base]) == 2  # no filter
    assert main(["batch", "cancel", "--filter", '{"nope": 1}', *base]) == 2
    assert main(["batch", "action", "--filter", FILTER, *base]) == 2  # no action
    assert main(["batch", "status", *base]) == 2
    assert main(["batch", "status", "00000000-0000-0000-0000-000000000000", *base]) == 1


@pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)
def test_batch_and_publish_with_url_and_token(deployed, capsys, tmp_path) -> None:  # noqa: F811
    """`--url`/`--token` against a real `stateward serve`: publish starts instances through
    `POST /messages/{name}`, batch cancels them through GraphQL and waits for the end."""
    db_url, key = deployed
    assert main(["token", "--db", db_url, "--key-file", key]) == 0
    token = capsys.readouterr().out.strip()
    env = {"STATEWARD_DATABASE_URL": db_url, "STATEWARD_BUS_URL": "memory://"}
    server = ServerProcess(env=env, cwd=tmp_path).start()
    try:
        remote = ["--url", server.url, "--token", token]
        for i in range(2):
            argv = ["publish", "lead", "--namespace", "acme/sales", "--key", "k",
                    "--message-id", f"web-{i}", *remote]  # fmt: skip
            assert main(argv) == 0
            assert len(json.loads(capsys.readouterr().out)["started"]) == 1
        assert main(["publish", "lead", "--namespace", "acme/sales", "--key", "k",
                     "--message-id", "web-0", *remote]) == 0  # fmt: skip
        assert json.loads(capsys.readouterr().out)["duplicate"] is True
        base = server.url.removesuffix("/graphql")
        assert main(["batch", "cancel", "--filter", FILTER, "--url", base, "--token", token]) == 0
        done = json.loads(capsys.readouterr().out)
        assert (done["status"], done["total"], done["succeeded"]) == ("completed", 2, 2)
        assert main(["batch", "status", done["id"], *remote]) == 0
        assert json.loads(capsys.readouterr().out)["succeeded"] == 2
        bad = ["--url", server.url, "--token", "sw_not_a_token"]
        assert main(["batch", "status", done["id"], *bad]) == 1
        assert "UNAUTHENTICATED" in capsys.readouterr().err
        assert main(["publish", "lead", "--namespace", "acme/sales", "--key", "k", *bad]) == 1
        assert "UNAUTHENTICATED" in capsys.readouterr().err
    finally:
        server.stop()
