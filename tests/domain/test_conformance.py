"""The shared conformance vectors pass: through the CLI runner and case by case in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from stateward import conformance

FILES = ("expressions.json", "validation.json", "engine.json", "v2.1/expressions.json")
PROJECT_VECTORS = Path(__file__).resolve().parent / "vectors"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def test_the_runner_passes_every_case_of_the_three_files(conformance_dir: Path) -> None:
    paths = [str(conformance_dir / name) for name in FILES]
    done = subprocess.run(
        [sys.executable, "-m", "stateward.conformance", *paths],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=False,
    )
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout + done.stderr
    assert last.endswith(" passed, 0 failed")


def test_the_runner_without_arguments_runs_the_shared_and_the_project_vectors(
    conformance_dir: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stateward.conformance"],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=False,
        env={**os.environ, "STATEWARD_CONFORMANCE_DIR": str(conformance_dir)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    passed = int(done.stdout.strip().splitlines()[-1].split()[0])
    every = [*conformance_dir.rglob("*.json"), *PROJECT_VECTORS.glob("*.json")]
    total = sum(len(json.loads(p.read_text(encoding="utf-8"))["cases"]) for p in every)
    assert passed == total


def test_a_directory_argument_runs_every_vector_file_under_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stateward.conformance", str(PROJECT_VECTORS)],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    total = sum(
        len(json.loads(p.read_text(encoding="utf-8"))["cases"])
        for p in PROJECT_VECTORS.glob("*.json")
    )
    assert done.stdout.strip().splitlines()[-1] == f"{total} passed, 0 failed"


def test_project_expression_case(project_expressions_case: dict[str, Any]) -> None:
    assert conformance.run_case("expressions", project_expressions_case) is None


def test_project_validation_case(project_validation_case: dict[str, Any]) -> None:
    assert conformance.run_case("validation", project_validation_case) is None


def test_project_engine_case(project_engine_case: dict[str, Any]) -> None:
    assert conformance.run_case("engine", project_engine_case) is None


def test_expression_case(expressions_case: dict[str, Any]) -> None:
    assert conformance.run_case("expressions", expressions_case) is None


def test_validation_case(validation_case: dict[str, Any]) -> None:
    assert conformance.run_case("validation", validation_case) is None


def test_engine_case(engine_case: dict[str, Any]) -> None:
    assert conformance.run_case("engine", engine_case) is None


def test_the_runner_reports_a_failing_case_and_exits_1(tmp_path: Path) -> None:
    vector = {
        "format": "stateward.conformance.expressions/1",
        "cases": [
            {"expr": "a = 1", "expect": True, "data": {"a": 1}},
            {"expr": "a = 1", "expect": True, "data": {"a": 2}},
        ],
    }
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(vector), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "stateward.conformance", str(path)],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1
    assert lines == ["wrong.json: a = 1: result: expected true, got false", "1 passed, 1 failed"]


def test_an_unknown_format_is_bad_usage(tmp_path: Path) -> None:
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"format": "something/1", "cases": []}), encoding="utf-8")
    assert conformance.main([str(path)]) == 2


def test_json_equality_never_confuses_booleans_with_numbers() -> None:
    assert conformance.json_equal(1, 1.0)
    assert not conformance.json_equal(True, 1)
    assert not conformance.json_equal({"a": [0]}, {"a": [False]})
