"""`stateward batch` on the database (issue 15), on SQLite and PostgreSQL."""

from __future__ import annotations

import json

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
