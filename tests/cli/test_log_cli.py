"""The deployment log from the command line: checkpoint, export, offline verify in a
fresh directory, restore onto SQLite and PostgreSQL, proofs — and tampering (a deleted
process, a truncated and rolled-back process) caught against an earlier checkpoint,
naming the first missing log index, both live and offline."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import text

from stateward.domain import merkle
from stateward.governance.keys import KeyPair, read_key_file
from stateward.persistence import create_engine
from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings

STATEWARD = str(Path(sys.executable).parent / "stateward")
CHILD = {
    "$version": "2.0", "$path": "shop/orders/check", "initial": "open",
    "states": {"open": {"label": "Open"}, "done": {"label": "Done", "terminal": True}},
    "actions": {"close": {"from": "open", "to": "done"}},
}  # fmt: skip
PARENT = {
    "$version": "2.0", "$path": "shop/orders/order", "initial": "new",
    "states": {"new": {"label": "New"}, "paid": {"label": "Paid"},
               "shipped": {"label": "Shipped", "terminal": True}},
    "actions": {
        "pay": {"from": "new", "to": "paid", "mutate": {"$set": {"amount": "input.amount"}},
                "spawn": [{"workflow": "shop/orders/check", "as": "checks"}]},
        "ship": {"from": "paid", "to": "shipped"},
    },
}  # fmt: skip


def run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, STATEWARD_NODE_KEY_FILE=str(tmp / "node.key"))
    return subprocess.run(
        [STATEWARD, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=180
    )


async def _populate(url: str, operator: KeyPair, node_key: Path) -> list[str]:
    rt = await Runtime.open(Settings(database_url=url, node_key_file=str(node_key)))
    try:
        await registry.deploy_workflow(rt, operator, CHILD)
        await registry.deploy_workflow(rt, operator, PARENT)
        ids = []
        for n in range(3):
            pid = (await start_instance(rt, operator.public, PARENT["$path"], {"n": n})).record.id
            await perform_action(rt, operator.public, pid, "pay", {"amount": n})
            ids.append(pid)
        return ids
    finally:
        await rt.close()


async def _sql(url: str, *statements: tuple[str, dict[str, Any]]) -> list[Any]:
    engine = create_engine(url)
    out = []
    try:
        async with engine.begin() as conn:
            for sql, params in statements:
                result = await conn.execute(text(sql), params)
                out.append(result.all() if result.returns_rows else None)
    finally:
        await engine.dispose()
    return out


def _setup(tmp: Path, url: str) -> tuple[list[str], Path]:
    key = tmp / "op.key"
    assert run(tmp, "keygen", "--out", str(key)).returncode == 0
    assert run(tmp, "init", "--db", url, "--key-file", str(key)).returncode == 0
    ids = asyncio.run(_populate(url, read_key_file(key), tmp / "node.key"))
    signed = run(tmp, "checkpoint", "--db", url, "--sign")
    assert signed.returncode == 0, signed.stderr
    cp = tmp / "cp.json"
    cp.write_text(signed.stdout)
    return ids, cp


def _export_and_check_offline(tmp_path: Path, url: str, cp: Path) -> Path:
    out = tmp_path / "log.jsonl"
    exported = run(tmp_path, "log", "export", "--db", url, "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["format"] == "stateward.log/1"
    assert [x["index"] for x in lines if "index" in x] == list(range(lines[0]["size"]))
    assert any("checkpoint" in x for x in lines)
    fresh = tmp_path / "elsewhere"
    fresh.mkdir()
    (fresh / "log.jsonl").write_bytes(out.read_bytes())
    (fresh / "cp.json").write_bytes(cp.read_bytes())
    offline = run(fresh, "verify", "--log", "log.jsonl", "--checkpoint", "cp.json")
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert sorted(p.name for p in fresh.iterdir()) == ["cp.json", "log.jsonl"]  # no database
    return out


def _restore_and_compare(tmp_path: Path, out: Path, cp: Path, source: str, target: str) -> None:
    restored = run(tmp_path, "log", "restore", "--log", str(out), "--db", target)
    assert restored.returncode == 0, restored.stderr
    again = run(tmp_path, "verify", "--db", target, "--checkpoint", str(cp))
    assert again.returncode == 0, again.stdout + again.stderr
    q = "SELECT id, state, status, seq, head_hash, workflow_version FROM processes ORDER BY id"
    [before], [after] = asyncio.run(_sql(source, (q, {}))), asyncio.run(_sql(target, (q, {})))
    assert [tuple(r) for r in before] == [tuple(r) for r in after]
    q = "SELECT level, idx, hash FROM log_nodes ORDER BY level, idx"
    assert asyncio.run(_sql(source, (q, {}))) == asyncio.run(_sql(target, (q, {})))
    refused = run(tmp_path, "log", "restore", "--log", str(out), "--db", target)
    assert refused.returncode == 1 and "empty database" in refused.stderr


def test_an_export_verifies_offline_and_restores_onto_sqlite(db_url, sqlite_db_url, tmp_path):
    _ids, cp = _setup(tmp_path, db_url)
    out = _export_and_check_offline(tmp_path, db_url, cp)
    live = run(tmp_path, "verify", "--db", db_url, "--checkpoint", str(cp))
    assert live.returncode == 0, live.stdout + live.stderr
    _restore_and_compare(tmp_path, out, cp, db_url, sqlite_db_url)


def test_a_sqlite_log_restores_onto_postgresql(sqlite_db_url, postgres_db_url, tmp_path):
    _ids, cp = _setup(tmp_path, sqlite_db_url)
    out = _export_and_check_offline(tmp_path, sqlite_db_url, cp)
    _restore_and_compare(tmp_path, out, cp, sqlite_db_url, postgres_db_url)


def test_proofs_from_the_command_line_verify(sqlite_db_url, tmp_path):
    ids, cp = _setup(tmp_path, sqlite_db_url)
    checkpoint = json.loads(cp.read_text())["checkpoint"]
    proof = run(tmp_path, "log", "proof", "--db", sqlite_db_url, ids[0], "2")
    assert proof.returncode == 0, proof.stderr
    p = json.loads(proof.stdout)
    assert p["root"] == checkpoint["root"]
    assert merkle.verify_inclusion(
        bytes.fromhex(p["leaf"]), p["index"], p["size"], [bytes.fromhex(h) for h in p["path"]],
        bytes.fromhex(checkpoint["root"]),
    )  # fmt: skip
    c = run(tmp_path, "log", "consistency", "--db", sqlite_db_url, "3")
    assert c.returncode == 0, c.stderr
    body = json.loads(c.stdout)
    assert body["second_root"] == checkpoint["root"]
    missing = run(tmp_path, "log", "proof", "--db", sqlite_db_url, "nope", "1")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr


def _index_of(url: str, pid: str) -> list[int]:
    [rows] = asyncio.run(_sql(url, (
        "SELECT l.idx FROM log_nodes l JOIN events e ON e.id = l.event_id "
        "WHERE e.process_id = :p ORDER BY l.idx", {"p": pid})))  # fmt: skip
    return [int(r[0]) for r in rows]


def _assert_caught(tmp: Path, url: str, cp: Path, first_missing: int) -> None:
    live = run(tmp, "verify", "--db", url, "--checkpoint", str(cp))
    assert live.returncode == 1, live.stdout + live.stderr
    assert f"first missing log index {first_missing}" in live.stdout, live.stdout
    out = tmp / "tampered.jsonl"
    assert run(tmp, "log", "export", "--db", url, "--out", str(out)).returncode == 0
    offline = run(tmp, "verify", "--log", str(out), "--checkpoint", str(cp))
    assert offline.returncode == 1, offline.stdout + offline.stderr
    assert f"first missing log index {first_missing}" in offline.stdout, offline.stdout


def test_deleting_a_whole_process_is_caught_naming_the_first_missing_index(db_url, tmp_path):
    ids, cp = _setup(tmp_path, db_url)
    victim = ids[1]
    [kids] = asyncio.run(
        _sql(db_url, ("SELECT id FROM processes WHERE parent_id = :p", {"p": victim}))
    )
    doomed = [victim, *(k[0] for k in kids)]
    first = min(i for pid in doomed for i in _index_of(db_url, pid))
    for pid in reversed(doomed):
        p = {"p": pid}
        asyncio.run(_sql(db_url,
            ("DELETE FROM log_nodes WHERE event_id IN "
             "(SELECT id FROM events WHERE process_id = :p)", p),
            ("DELETE FROM assignments WHERE process_id = :p", p),
            ("DELETE FROM schedules WHERE process_id = :p", p),
            ("DELETE FROM state_visits WHERE process_id = :p", p),
            ("DELETE FROM events WHERE process_id = :p", p),
            ("DELETE FROM processes WHERE id = :p", p),
        ))  # fmt: skip
    before = run(tmp_path, "verify", "--db", db_url)  # even without a checkpoint: a gap
    assert before.returncode == 1 and "LOG_GAP" in before.stdout
    _assert_caught(tmp_path, db_url, cp, first)


def test_truncating_a_process_and_rolling_back_its_row_is_caught(db_url, tmp_path):
    ids, cp = _setup(tmp_path, db_url)
    [kids] = asyncio.run(
        _sql(db_url, ("SELECT id FROM processes WHERE parent_id = :p", {"p": ids[2]}))
    )
    child = kids[0][0]  # the last process written: its $start is the log's last leaf
    last = _index_of(db_url, child)[-1]
    [[row]] = asyncio.run(_sql(db_url, ("SELECT max(idx) FROM log_nodes WHERE level = 0", {})))
    assert last == row[0]
    # the parent's `pay` event (and the spawn) is cut; roll the parent's row back to seq 1
    pay = _index_of(db_url, ids[2])[-1]
    asyncio.run(_sql(db_url,
        ("DELETE FROM log_nodes WHERE level = 0 AND idx >= :i", {"i": pay}),
        ("DELETE FROM events WHERE process_id = :c", {"c": child}),
        ("DELETE FROM state_visits WHERE process_id = :c", {"c": child}),
        ("DELETE FROM processes WHERE id = :c", {"c": child}),
        ("DELETE FROM events WHERE process_id = :p AND seq = 2", {"p": ids[2]}),
        ("UPDATE processes SET seq = 1, state = 'new', head_hash = "
         "(SELECT hash FROM events WHERE process_id = :p AND seq = 1) WHERE id = :p",
         {"p": ids[2]}),
        ("UPDATE process_data SET data = :d WHERE process_id = :p",
         {"p": ids[2], "d": json.dumps({"n": 2})}),
        ("UPDATE log_head SET size = :i", {"i": pay}),
    ))  # fmt: skip
    _assert_caught(tmp_path, db_url, cp, pay)
