"""STATEWARD_SERVER_CPUS (`commands/affinity.py`): `stateward serve` keeps its event loop
and database threads on the CPUs named, the signature worker moves to the others, and a
list it cannot apply stops the server with a reason (issue 18, session 19)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stateward.governance.keys import KeyPair
from stateward.governance.sigworker import (
    ENV,
    WORKER_CPUS_ENV,
    SignatureWorker,
    worker_cpus,
    worker_enabled,
)
from stateward.settings import MAX_CPU, Settings, cpu_list

ALLOWED = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
two_cpus = pytest.mark.skipif(len(ALLOWED) < 2, reason="needs two CPUs this process may use")


def _cpus_of(path: str) -> str:
    """`Cpus_allowed_list` of /proc/PID or /proc/PID/task/TID."""
    for line in Path(path, "status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no Cpus_allowed_list in {path}/status")


@pytest.mark.parametrize(
    ("value", "cpus"),
    [("", ()), ("1", (1,)), ("0,2-3", (0, 2, 3)), (" 3 , 1 ", (1, 3)), ("2-2", (2,))],
)
def test_a_cpu_list_is_read_as_linux_writes_it(value: str, cpus: tuple[int, ...]) -> None:
    assert Settings.from_env({"STATEWARD_SERVER_CPUS": value}).server_cpus == cpus


@pytest.mark.parametrize(
    "value", ["a", "1-", "-1", "3-1", "1,,2", "²", "١", "1-2-3", f"0-{MAX_CPU + 1}", "99999"]
)
def test_anything_else_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(ValueError, match="STATEWARD_SERVER_CPUS"):
        cpu_list("STATEWARD_SERVER_CPUS", value)


def _serve(tmp_path: Path, cpus: str, *flags: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "STATEWARD_SERVER_CPUS": cpus,
        "STATEWARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'cpus.db'}",
        "STATEWARD_OPERATOR_KEY_FILE": str(tmp_path / "operator.json"),
        "STATEWARD_BUS_URL": "memory://",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop(WORKER_CPUS_ENV, None)
    return subprocess.Popen(
        [sys.executable, "-m", "stateward.cli", "serve", "--port", "0", *flags],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


@two_cpus
def test_every_thread_of_the_server_keeps_to_the_cpu_named(tmp_path: Path) -> None:
    cpu = ALLOWED[-1]
    proc = _serve(tmp_path, str(cpu))
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "listening on" in line:
                break
        assert any("listening on" in line for line in lines), "".join(lines)
        said = [line for line in lines if "signature checks on" in line]
        rest = ",".join(str(c) for c in ALLOWED if c != cpu)
        assert said and f"threads on CPU {cpu}; signature checks on {rest}" in said[0]
        threads = sorted(Path(f"/proc/{proc.pid}/task").iterdir())
        assert len(threads) > 1  # the loop, aiosqlite's driver threads, uvloop's workers
        assert {_cpus_of(str(task)) for task in threads} == {str(cpu)}
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.parametrize(
    ("cpus", "flags", "reason"),
    [
        (str(MAX_CPU), (), f"CPU {MAX_CPU} is not among the CPUs this process may run on"),
        ("0", ("--workers", "2"), "cannot be combined with --workers"),
    ],
)
def test_a_list_that_cannot_be_applied_stops_the_server_with_the_reason(
    tmp_path: Path, cpus: str, flags: tuple[str, ...], reason: str
) -> None:
    proc = _serve(tmp_path, cpus, *flags)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert reason in out
    assert "listening on" not in out


@two_cpus
async def test_the_signature_worker_moves_to_the_cpus_set_apart_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cpu = ALLOWED[0]
    monkeypatch.setenv(WORKER_CPUS_ENV, str(cpu))
    monkeypatch.delenv(ENV, raising=False)
    assert worker_cpus() == {cpu} and worker_enabled()
    key = KeyPair.from_seed(bytes(range(32)))
    worker = SignatureWorker()
    try:
        assert await worker.check([(key.public, b"m", key.sign(b"m"))]) == [True]
        assert worker.transport is not None
        pid = worker.transport.get_pid()
        for _ in range(50):  # the helper moves itself as it starts
            if _cpus_of(f"/proc/{pid}") == str(cpu):
                break
            await asyncio.sleep(0.05)
        assert _cpus_of(f"/proc/{pid}") == str(cpu)
    finally:
        worker.close()


def test_the_worker_stays_off_when_turned_off_even_with_cpus_set_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(WORKER_CPUS_ENV, "0")
    monkeypatch.setenv(ENV, "0")
    assert not worker_enabled()
    monkeypatch.setenv(WORKER_CPUS_ENV, "not,cpus")
    assert worker_cpus() == set()
