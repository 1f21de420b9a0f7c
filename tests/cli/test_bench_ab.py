"""`bench/ab.py`: the revision it compares against, exported from git, and its figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from ab import export_revision, figures  # noqa: E402


class _Series:
    def __init__(self, cpu_ms: list[float], rates: list[float]) -> None:
        self.cpu_ms, self.rates = cpu_ms, rates


def test_figures_are_the_median_of_the_per_round_ratios() -> None:
    before = _Series([1.0, 2.0, 1.0], [100.0, 50.0, 100.0])
    after = _Series([0.9, 1.6, 1.1], [110.0, 60.0, 90.0])
    out = figures(before, after)  # type: ignore[arg-type]
    assert out["cpu_ratios"] == pytest.approx([0.9, 0.8, 1.1])
    assert out["cpu_ratio_after_vs_before"] == pytest.approx(0.9)
    assert out["cpu_ratio_range"] == pytest.approx([0.8, 1.1])
    assert out["before_server_ms_per_action"] == 1.0
    assert out["after_server_ms_per_action"] == pytest.approx(1.1)
    assert out["after_actions_per_s"] == 90.0


def test_the_before_revision_is_the_stateward_package_of_that_commit(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    commit = export_revision("HEAD", tmp_path)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert commit == head
    assert (tmp_path / "stateward" / "__init__.py").is_file()
    assert (tmp_path / "stateward" / "cli.py").is_file()
    assert not (tmp_path / "tests").exists()


def test_an_unknown_revision_is_refused(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    with pytest.raises(subprocess.CalledProcessError):
        export_revision("no-such-revision-anywhere", tmp_path)


def test_a_revision_that_looks_like_an_option_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a revision"):
        export_revision("--output=/tmp/x", tmp_path)
    assert list(tmp_path.iterdir()) == []
