"""`stateward validate` (DESIGN §11): the examples pass, broken sets fail with parseable lines."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stateward.cli import main
from stateward.commands.validate import format_finding
from stateward.domain.errors import Problem

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
LINE = re.compile(r"^(?P<path>.+?): (?P<code>[A-Z_]+) (?P<pointer>#\S*) (?P<message>.+)$")


def workflow(path: str, **extra: Any) -> dict[str, Any]:
    return {
        "$version": "2.0",
        "$path": path,
        "initial": "a",
        "states": {"a": {"label": "A"}, "b": {"label": "B", "terminal": True}},
        "actions": {"go": {"from": "a", "to": "b"}},
        **extra,
    }


def write(root: Path, name: str, content: Any) -> Path:
    file = root / name
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return file


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(["validate", *argv])
    return code, capsys.readouterr().out.splitlines()


def findings(lines: list[str]) -> list[tuple[str, str, str]]:
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    return [(m["path"], m["code"], m["pointer"]) for m in parsed if m]


def test_the_examples_validate_without_errors_or_warnings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, lines = run(capsys, str(EXAMPLES))
    assert (code, lines) == (0, [])


def test_the_installed_script_validates_the_examples() -> None:
    script = Path(sys.executable).with_name("stateward")
    if not script.exists():
        pytest.skip("the stateward script is not installed in this environment")
    done = subprocess.run([str(script), "validate", "examples/"], cwd=ROOT, capture_output=True)
    assert done.returncode == 0, done.stdout
    count = len(list(EXAMPLES.rglob("*.json")))
    assert f"{count} file(s): 0 error(s)".encode() in done.stderr


def test_a_broken_set_fails_with_one_parseable_line_per_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "ops/a/one.json", workflow("ops/a/one"))
    write(tmp_path, "ops/a/copy.json", workflow("ops/a/one"))
    write(tmp_path, "ops/a/misnamed.json", workflow("ops/b/elsewhere"))
    write(tmp_path, "ops/a/broken.json", '{"$version": "2.0",')
    bad = workflow("ops/a/bad", states={"a": {"label": "A"}, "my state": {"terminal": "no"}})
    write(tmp_path, "ops/a/bad.json", bad)
    code, lines = run(capsys, str(tmp_path))
    assert code == 1
    found = {(Path(p).relative_to(tmp_path).as_posix(), c, ptr) for p, c, ptr in findings(lines)}
    assert found == {
        ("ops/a/copy.json", "TARGET_MISMATCH", "#/$path"),
        ("ops/a/one.json", "DUPLICATE_PATH", "#/$path"),
        ("ops/a/misnamed.json", "TARGET_MISMATCH", "#/$path"),
        ("ops/a/broken.json", "INVALID_JSON", "#"),
        ("ops/a/bad.json", "INVALID_FIELD", "#/states/my%20state/terminal"),
        ("ops/a/bad.json", "UNKNOWN_STATE", "#/actions/go/to"),
        ("ops/a/bad.json", "MISSING_LABEL", "#/states/my%20state"),
        ("ops/a/bad.json", "UNREACHABLE_STATE", "#/states/my%20state"),
        ("ops/a/bad.json", "DEAD_END_STATE", "#/states/my%20state"),
    }
    assert any("file name ops/a/misnamed.json does not match" in line for line in lines)
    assert all(": warning: " not in line for line in lines)
    assert any(" warning: state 'my state' has no label" in line for line in lines)


def test_spawn_targets_resolve_within_the_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parent = workflow("ops/a/parent")
    parent["actions"]["go"]["spawn"] = [{"workflow": "ops/b/child"}]
    write(tmp_path, "ops/a/parent.json", parent)
    code, lines = run(capsys, str(tmp_path))
    assert code == 1 and [c for _, c, _ in findings(lines)] == ["UNRESOLVED_SPAWN"]
    write(tmp_path, "ops/b/child.json", workflow("ops/b/child"))
    assert run(capsys, str(tmp_path)) == (0, [])


def test_hooks_resolve_to_star_modules_of_the_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flow = workflow("ops/a/auto")
    flow["states"]["a"].update(audience="system", hook="rules:decide")
    write(tmp_path, "ops/a/auto.json", flow)
    code, lines = run(capsys, str(tmp_path))
    assert code == 1 and [c for _, c, _ in findings(lines)] == ["UNRESOLVED_HOOK"]
    write(tmp_path, "ops/a/rules.star", "def decide(ctx):\n    return {}\n")
    assert run(capsys, str(tmp_path)) == (0, [])
    assert run(capsys, str(tmp_path / "ops/a/auto.json")) == (0, [])  # a file alone: shape only


def test_json_report_lists_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "ops/a/one.json", workflow("ops/a/one", **{"$category": "x"}))
    code, lines = run(capsys, "--json", str(tmp_path))
    report = json.loads("\n".join(lines))
    assert code == 1 and report["valid"] is False
    [entry] = report["files"]
    assert entry["workflow"] == "ops/a/one"
    assert entry["errors"] == [
        {"code": "FORBIDDEN_KEY", "message": entry["errors"][0]["message"], "pointer": "/$category"}
    ]


def test_a_missing_path_is_bad_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["validate"]) == 2


def test_findings_format_root_and_escaped_pointers() -> None:
    root = Problem("INVALID_JSON", "not valid\nJSON", "")
    assert format_finding("x.json", root) == "x.json: INVALID_JSON # not valid JSON"
    odd = Problem("UNKNOWN_STATE", "m", "/actions/a~1b#1/to", severity="warning")
    assert format_finding("x.json", odd) == "x.json: UNKNOWN_STATE #/actions/a~1b%231/to warning: m"


def test_a_subfolder_of_the_examples_validates_with_its_root_inferred(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # intake spawns support/desk/ticket and hooks into intake/public/router.star: both resolve
    # against the workspace root inferred from the files' $path (examples/).
    for folder in ("intake", "intake/public", "support/desk", "customer/retail"):
        assert run(capsys, str(EXAMPLES / folder)) == (0, []), folder


def test_a_subfolder_still_reports_a_misplaced_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "ops/a/one.json", workflow("ops/a/one"))
    write(tmp_path, "ops/a/two.json", workflow("ops/a/two"))
    write(tmp_path, "ops/a/stray.json", workflow("ops/b/stray"))
    code, lines = run(capsys, str(tmp_path / "ops"))
    assert code == 1
    assert [(Path(p).name, c) for p, c, _ in findings(lines)] == [("stray.json", "TARGET_MISMATCH")]
    assert "file name ops/a/stray.json does not match $path 'ops/b/stray'" in lines[0]


def test_a_folder_whose_name_is_not_the_namespace_is_not_taken_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # drafts/one.json says ops/a/one: the folder is not ops/a, so the root stays drafts/.
    write(tmp_path, "drafts/one.json", workflow("ops/a/one"))
    code, lines = run(capsys, str(tmp_path / "drafts"))
    assert code == 1 and [c for _, c, _ in findings(lines)] == ["TARGET_MISMATCH"]


def test_deploy_of_a_subfolder_puts_its_modules_in_their_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'sub.db'}"
    key = str(tmp_path / "k.json")
    assert main(["init", "--db", db, "--key-file", key]) == 0
    assert main(["deploy", "--db", db, "--key-file", key, str(EXAMPLES / "support/desk")]) == 0
    out = tmp_path / "support.json"
    assert main(["export", "--db", db, "support", "--out", str(out)]) == 0
    package = json.loads(out.read_text("utf-8"))
    assert [(m["namespace"], m["name"]) for m in package["modules"]] == [("support/desk", "triage")]
    assert [w["$path"] for w in package["workflows"]] == ["support/desk/ticket"]


def test_a_state_entered_only_by_another_files_spawn_is_reachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    child = workflow("ops/a/child")
    child["states"]["fast"] = {"label": "Fast"}
    child["actions"]["rush"] = {"from": "fast", "to": "b"}
    write(tmp_path, "ops/a/child.json", child)
    _code, lines = run(capsys, str(tmp_path))
    assert [(c, p) for _, c, p in findings(lines)] == [("UNREACHABLE_STATE", "#/states/fast")]
    parent = workflow("ops/parent")  # a namespace above the child's: its `to` is honoured
    parent["actions"]["go"]["spawn"] = [{"workflow": "ops/a/child", "to": "fast"}]
    write(tmp_path, "ops/parent.json", parent)
    assert run(capsys, str(tmp_path)) == (0, [])
