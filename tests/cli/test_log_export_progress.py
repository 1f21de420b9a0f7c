"""`log export` reports its progress: off a terminal, one plain line per tenth of a long log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from stateward.governance.keys import read_key_file
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings
from tests.cli.test_log_cli import CHILD, PARENT, run


async def _many_events(url: str, key: Path, node_key: Path) -> None:
    from stateward.runtime.access import registry

    operator = read_key_file(key)
    rt = await Runtime.open(Settings(database_url=url, node_key_file=str(node_key)))
    try:
        await registry.deploy_workflow(rt, operator, CHILD)
        await registry.deploy_workflow(rt, operator, PARENT)
        for n in range(40):  # 40 × (start, pay, spawned child) = 120 events
            pid = (await start_instance(rt, operator.public, PARENT["$path"], {"n": n})).record.id
            await perform_action(rt, operator.public, pid, "pay", {"amount": n})
    finally:
        await rt.close()


def test_log_export_prints_progress_lines_off_a_terminal(sqlite_db_url, tmp_path):
    key = tmp_path / "op.key"
    assert run(tmp_path, "keygen", "--out", str(key)).returncode == 0
    assert run(tmp_path, "init", "--db", sqlite_db_url, "--key-file", str(key)).returncode == 0
    asyncio.run(_many_events(sqlite_db_url, key, tmp_path / "node.key"))
    out = tmp_path / "log.jsonl"
    exported = run(tmp_path, "log", "export", "--db", sqlite_db_url, "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    size = json.loads(out.read_text().splitlines()[0])["size"]
    assert size >= 100
    lines = [x for x in exported.stderr.splitlines() if x.startswith("log export: ")]
    assert len(lines) == 10, exported.stderr
    assert lines[-1] == f"log export: {size}/{size}"
    assert exported.stderr.rstrip().endswith("line(s)")  # the summary stays last
