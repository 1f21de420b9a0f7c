"""`stateward keygen` and `stateward sign`, through the real command line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from stateward.cli import main
from stateward.governance.envelope import Envelope, SignedEnvelope
from stateward.governance.keys import b64url_decode, read_key_file
from stateward.governance.verification import verify_envelope

ENVELOPE: dict[str, Any] = {
    "net": "net-cli",
    "process": "p-1",
    "action": {"name": "approve", "workflow": "customer/loan", "input": {"amount": 5}},
}


def _stateward(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stateward.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "alice.json"
    assert main(["keygen", "--out", str(path)]) == 0
    return path


def test_keygen_writes_a_0600_key_file_and_prints_the_public_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "k.json"
    assert main(["keygen", "--out", str(path)]) == 0
    printed = capsys.readouterr().out.strip()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    content = json.loads(path.read_text())
    assert set(content) == {"public", "secret"}
    assert content["public"] == printed == read_key_file(path).public
    assert len(b64url_decode(content["secret"])) == 32


def test_keygen_refuses_to_overwrite_and_exits_2(
    key_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = key_file.read_text()
    capsys.readouterr()
    assert main(["keygen", "--out", str(key_file)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "already exists" in captured.err
    assert key_file.read_text() == before


def test_keygen_into_a_missing_folder_is_bad_usage(tmp_path: Path) -> None:
    assert main(["keygen", "--out", str(tmp_path / "no" / "such" / "k.json")]) == 2


def test_sign_from_stdin_fills_actor_ts_nonce_and_prints_a_verifiable_event(
    key_file: Path,
) -> None:
    result = _stateward("sign", "--key-file", str(key_file), "-", stdin=json.dumps(ENVELOPE))
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    assert set(out) == {"event", "signer", "signature"}
    public = read_key_file(key_file).public
    assert out["signer"] == out["event"]["actor"] == public
    assert out["event"]["v"] == 1
    signed = SignedEnvelope.from_json(out)
    verify_envelope(signed, net="net-cli", now=datetime.now(UTC), trusted_signers=())


def test_sign_from_a_file_keeps_given_fields(
    key_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envelope = dict(
        ENVELOPE, v=1, ts="2026-11-30T02:21:09.123Z", nonce="AAECAwQFBgcICQoLDA0ODw", actor="system"
    )
    path = tmp_path / "env.json"
    path.write_text(json.dumps(envelope))
    capsys.readouterr()
    assert main(["sign", "--key-file", str(key_file), str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["event"] == Envelope.from_json(envelope).to_json()
    assert out["signer"] == read_key_file(key_file).public


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('{"net": "n", "net": "m"}', "DUPLICATE_KEY"),
        ('{"net": NaN}', "INVALID_JSON"),
        ("{", "INVALID_JSON"),
        ('{"net": "n"}', "INVALID_INPUT"),
        (
            json.dumps(dict(ENVELOPE, action={**ENVELOPE["action"], "input": {"x": 2**60 + 1}})),
            "INVALID_JSON",
        ),
    ],
)
def test_sign_rejects_bad_envelopes_with_exit_1_and_a_code(
    key_file: Path, text: str, code: str
) -> None:
    result = _stateward("sign", "--key-file", str(key_file), stdin=text)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"<stdin>: {code} ")


def test_sign_with_a_missing_key_file_or_envelope_is_bad_usage(
    key_file: Path, tmp_path: Path
) -> None:
    assert main(["sign", "--key-file", str(tmp_path / "none.json"), "-"]) == 2
    assert main(["sign", "--key-file", str(key_file), str(tmp_path / "none.json")]) == 2
