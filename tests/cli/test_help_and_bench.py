"""`stateward --help`, every subcommand's `--help`, and `stateward bench` (DESIGN §11)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stateward.cli import build_parser, main
from stateward.commands.bench import find_bench

ROOT = Path(__file__).resolve().parents[2]
SUBCOMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
ENGINE_KEYS = {"actions_per_s", "ratio_vs_transitions", "ratio_vs_python_statemachine"}


def test_the_top_level_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: stateward")
    for name in SUBCOMMANDS:
        assert name in out
    assert "Exit codes" in out


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_explains_itself(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([name, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: stateward {name}")


def test_the_contract_subcommands_are_all_there() -> None:
    contract = {"serve", "init", "keygen", "sign", "validate", "deploy", "verify", "export"}
    assert set(SUBCOMMANDS) >= contract | {"import", "bench", "token"}


def test_an_unknown_subcommand_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_bench_scripts_are_found_from_the_checkout_and_its_subfolders() -> None:
    assert find_bench("engine", ROOT) == ROOT / "bench" / "engine.py"
    assert find_bench("sla", ROOT / "stateward" / "domain") == ROOT / "bench" / "sla.py"
    assert find_bench("nope", ROOT) is None


def test_bench_outside_a_checkout_is_bad_usage(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stateward.cli", "bench", "engine", "--quick"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2
    assert "bench/engine.py not found" in done.stderr


def test_bench_engine_quick_json_ends_with_the_figures_from_the_repo_root() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stateward.cli", "bench", "engine", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(figures) >= ENGINE_KEYS
    assert all(figures[key] > 0 for key in ENGINE_KEYS)
