"""Fixtures for the domain tests: the shared conformance vectors.

The vectors live in `../shared/conformance/` next to the project (or wherever
`STATEWARD_CONFORMANCE_DIR` points). A test that takes an argument named
`expressions_case`, `validation_case` or `engine_case` runs once per case of the matching
file (`expressions_case` also covers `v2.1/expressions.json`); when the files are absent, it
is skipped with the reason. `project_<kind>_case` runs the project's own DSL 2.1 vectors
(`tests/domain/vectors/<kind>.json`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
_CASE_FILES = {
    "expressions_case": ("expressions.json", "v2.1/expressions.json"),
    "validation_case": ("validation.json",),
    "engine_case": ("engine.json",),
}
#: The project's own vectors for the DSL 2.1 constructs (same format as the shared ones).
PROJECT_VECTORS = Path(__file__).resolve().parent / "vectors"
_PROJECT_FILES = {
    "project_expressions_case": "expressions.json",
    "project_validation_case": "validation.json",
    "project_engine_case": "engine.json",
}


def conformance_dir() -> Path | None:
    """The conformance vector directory, or None when it is not there."""
    configured = os.environ.get("STATEWARD_CONFORMANCE_DIR")
    path = Path(configured) if configured else PROJECT_ROOT.parent / "shared" / "conformance"
    return path if path.is_dir() else None


def load_conformance_cases(filename: str, directory: Path | None = None) -> list[dict[str, Any]]:
    """Every case of one conformance file (`{"format": ..., "cases": [...]}`)."""
    directory = directory or conformance_dir()
    if directory is None or not (directory / filename).is_file():
        return []
    document = json.loads((directory / filename).read_text(encoding="utf-8"))
    cases = document["cases"] if isinstance(document, dict) else document
    return list(cases)


def _case_id(number: int, case: dict[str, Any]) -> str:
    label = case.get("name") or case.get("expr") or ""
    return f"{number:03d}-{str(label)[:40]}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `<file>_case` arguments with the cases of that conformance file."""
    for argname, filenames in _CASE_FILES.items():
        if argname not in metafunc.fixturenames:
            continue
        cases = [c for name in filenames for c in load_conformance_cases(name)]
        if cases:
            ids = [_case_id(n, c) for n, c in enumerate(cases)]
            metafunc.parametrize(argname, cases, ids=ids)
        else:
            reason = (
                f"conformance file {filenames[0]} not found "
                f"(set STATEWARD_CONFORMANCE_DIR or put it in ../shared/conformance)"
            )
            metafunc.parametrize(argname, [pytest.param(None, marks=pytest.mark.skip(reason))])
    for argname, filename in _PROJECT_FILES.items():
        if argname in metafunc.fixturenames:
            cases = load_conformance_cases(filename, PROJECT_VECTORS)
            ids = [_case_id(n, c) for n, c in enumerate(cases)]
            metafunc.parametrize(argname, cases, ids=ids)


@pytest.fixture(scope="session", name="conformance_dir")
def conformance_dir_fixture() -> Path:
    """The conformance directory; skips the test when it is absent."""
    directory = conformance_dir()
    if directory is None:
        pytest.skip("conformance vectors not found (set STATEWARD_CONFORMANCE_DIR)")
    return directory
