"""The import contracts of pyproject.toml (`lint-imports`) hold, and they bite.

`lint-imports` runs on a temporary copy of the package: unchanged it keeps every contract;
with one forbidden import added it fails and names the contract that import breaks. The
kernel operation table is filled by the composition root with every reserved name.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stateward.domain import engine
from stateward.runtime import operations
from stateward.runtime.core import kernel

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _copy(tmp_path: Path) -> Path:
    """The package and its pyproject.toml, copied into `tmp_path` (no caches)."""
    shutil.copytree(
        ROOT / "stateward", tmp_path / "stateward",
        ignore=shutil.ignore_patterns("__pycache__", "static"),
    )  # fmt: skip
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint(project: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` run in `project` (it analyses the package found there first)."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=project, capture_output=True, text=True,
        timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(project)},
    )  # fmt: skip


def _add_import(project: Path, module: str, statement: str) -> None:
    path = project / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{statement}  # noqa\n")


def test_the_package_keeps_every_contract(tmp_path: Path) -> None:
    result = _lint(_copy(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "statement", "contract"),
    [
        (
            "stateward.domain.model",
            "import stateward.persistence.db",
            "The domain imports nothing of the project BROKEN",
        ),
        (
            "stateward.resolvers.reads",
            "from stateward.persistence.uow import UnitOfWork",
            "The GraphQL layer never imports persistence",
        ),
        (
            "stateward.runtime.core.kernel",
            "from stateward.runtime.sweeps import sla",
            "Runtime: composition root -> feature packages -> core BROKEN",
        ),
        (
            "stateward.runtime.sweeps.sla",
            "from stateward.runtime.queues import assignments",
            "Runtime feature packages are independent",
        ),
        (
            "stateward.resolvers.kernel",
            "from stateward.schema.types.instance import Instance",
            "stateward.resolvers is not allowed to import stateward.schema",
        ),
    ],
)
def test_one_forbidden_import_fails_the_check(
    tmp_path: Path, module: str, statement: str, contract: str
) -> None:
    project = _copy(tmp_path)
    _add_import(project, module, statement)
    result = _lint(project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert contract in result.stdout, result.stdout
    assert module in result.stdout  # the report names the offending module of the copy


def test_the_composition_root_registers_every_reserved_operation() -> None:
    assert set(kernel.KERNEL_OPS) == set(engine.KERNEL_OPS)
    assert set(operations.OPERATIONS) == set(engine.KERNEL_OPS) - {
        kernel.START,
        kernel.CANCEL,
        kernel.ADVANCE,
    }
    assert kernel.GOVERNANCE_OPS  # registry events have their operation
