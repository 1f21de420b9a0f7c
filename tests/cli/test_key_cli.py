"""`stateward key rotate|revoke`: the registry events built and signed from key files; a
public key beginning with "-" (base64url: one key in 64) is a key, not an option."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stateward.cli import build_parser
from stateward.governance.keys import generate_keypair

STATEWARD = str(Path(sys.executable).parent / "stateward")


def run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, STATEWARD_NODE_KEY_FILE=str(tmp / "node.key"))
    return subprocess.run(
        [STATEWARD, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=180
    )


def test_rotate_then_revoke_from_key_files(sqlite_db_url: str, tmp_path: Path) -> None:
    op, new = tmp_path / "op.key", tmp_path / "new.key"
    assert run(tmp_path, "keygen", "--out", str(op)).returncode == 0
    assert run(tmp_path, "init", "--db", sqlite_db_url, "--key-file", str(op)).returncode == 0
    rotated = run(tmp_path, "key", "rotate", "--db", sqlite_db_url, "--key-file", str(op),
                  "--new-key-file", str(new))  # fmt: skip
    assert rotated.returncode == 0, rotated.stderr
    assert new.exists() and len(rotated.stdout.strip()) == 43
    # the old key is retired: it can no longer sign, the new one is admin
    again = run(tmp_path, "key", "rotate", "--db", sqlite_db_url, "--key-file", str(op),
                "--new-key-file", str(tmp_path / "other.key"))  # fmt: skip
    assert again.returncode == 1 and "BAD_SIGNATURE" in again.stderr
    victim = tmp_path / "victim.key"
    public = run(tmp_path, "keygen", "--out", str(victim)).stdout.strip()
    revoked = run(tmp_path, "key", "revoke", "--db", sqlite_db_url, "--key-file", str(new), public)
    assert revoked.returncode == 0, revoked.stderr
    refused = run(tmp_path, "key", "revoke", "--db", sqlite_db_url, "--key-file", str(victim),
                  rotated.stdout.strip())  # fmt: skip
    assert refused.returncode == 1
    verified = run(tmp_path, "verify", "--db", sqlite_db_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _dashed_public_key() -> str:
    while True:  # one key in 64 begins with "-"
        public = generate_keypair().public
        if public.startswith("-"):
            return public


def test_a_public_key_beginning_with_a_dash_is_a_key_not_an_option(
    sqlite_db_url: str, tmp_path: Path
) -> None:
    dashed = _dashed_public_key()
    for verb in ("revoke", "trust", "distrust"):
        args = build_parser().parse_args(["key", verb, "--key-file", "op.key", dashed])
        assert args.key == dashed
    args = build_parser().parse_args(["key", "revoke", dashed, "--key-file", "op.key"])
    assert args.key == dashed and args.key_file == "op.key"
    op = tmp_path / "op.key"
    assert run(tmp_path, "keygen", "--out", str(op)).returncode == 0
    assert run(tmp_path, "init", "--db", sqlite_db_url, "--key-file", str(op)).returncode == 0
    revoked = run(tmp_path, "key", "revoke", "--db", sqlite_db_url, "--key-file", str(op), dashed)
    assert revoked.returncode == 0, revoked.stderr
    # a real option of the wrong shape is still refused as bad usage
    assert run(tmp_path, "key", "revoke", "--key-file", str(op), "-x").returncode == 2
