"""`stateward export` / `stateward import` through the command line, on SQLite and PostgreSQL."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from stateward.cli import main

INVOICE: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/billing/invoice",
    "initial": "open",
    "states": {"open": {"label": "Open"}, "paid": {"label": "Paid", "terminal": True}},
    "actions": {"pay": {"from": "open", "to": "paid"}},
}
ORDER: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/sales/order",
    "initial": "draft",
    "states": {
        "draft": {"label": "Draft"},
        "pricing": {"label": "Pricing", "audience": "system", "hook": "pricing:price"},
        "billed": {"label": "Billed", "terminal": True},
    },
    "actions": {
        "submit": {"from": "draft", "to": "pricing"},
        "bill": {"from": "pricing", "to": "billed", "spawn": [{"workflow": INVOICE["$path"]}]},
    },
}


@pytest.fixture
def key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STATEWARD_NODE_KEY_FILE", str(tmp_path / "node.key"))
    path = tmp_path / "op.key"
    assert main(["keygen", "--out", str(path)]) == 0
    return str(path)


@pytest.fixture
def source_db(db_url: str, key: str, tmp_path: Path) -> str:
    """A deployment with the acme workflows and module deployed by `stateward deploy`."""
    assert main(["init", "--db", db_url, "--key-file", key]) == 0
    root = tmp_path / "workspace"
    for definition in (INVOICE, ORDER):
        file = root / f"{definition['$path']}.json"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(definition))
    (root / "acme/sales/pricing.star").write_text('def price(ctx):\n    return {"total": 1}\n')
    assert main(["deploy", str(root), "--key-file", key, "--db", db_url]) == 0
    return db_url


@pytest.fixture
def target_db(db_kind: str, key: str, request: pytest.FixtureRequest) -> str:
    """A second, freshly initialized deployment of the same kind."""
    url = str(request.getfixturevalue(f"{db_kind}_db_url"))
    assert main(["init", "--db", url, "--key-file", key]) == 0
    return url


def test_export_then_import_deploys_the_same_package_elsewhere(
    source_db: str, target_db: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "acme.json"
    capsys.readouterr()
    assert main(["export", "acme", "--out", str(out), "--db", source_db]) == 0
    package = json.loads(out.read_text())
    assert [w["$path"] for w in package["workflows"]] == [INVOICE["$path"], ORDER["$path"]]
    assert list(package["workflows"][1]["states"]) == ["draft", "pricing", "billed"]

    assert main(["import", str(out), "--key-file", key, "--db", target_db]) == 0
    imported = capsys.readouterr()
    assert imported.out == ""
    assert "acme/sales/order v1" in imported.err

    assert main(["export", "acme", "--db", target_db]) == 0
    assert json.loads(capsys.readouterr().out) == package
    assert main(["verify", "--db", target_db]) == 0


def test_a_broken_package_is_reported_with_pointers_and_deploys_nothing(
    target_db: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = copy.deepcopy(ORDER)
    broken["states"]["draft"]["assign"] = 7
    package = {"format": "stateward.package/1", "workflows": [INVOICE, broken, INVOICE]}
    file = tmp_path / "broken.json"
    file.write_text(json.dumps(package))
    capsys.readouterr()
    assert main(["import", str(file), "--key-file", key, "--db", target_db]) == 1
    lines = capsys.readouterr().out.splitlines()
    codes = {tuple(line.split(" ", 3)[:3]) for line in lines}
    assert (f"{file}:", "INVALID_FIELD", "#/workflows/1/states/draft/assign") in codes
    assert (f"{file}:", "UNRESOLVED_HOOK", "#/workflows/1/states/pricing/hook") in codes
    assert (f"{file}:", "DUPLICATE_PATH", "#/workflows/2/$path") in codes
    assert main(["export", "acme", "--db", target_db]) == 1
    assert capsys.readouterr().out.startswith("acme: NOT_FOUND # namespace acme has no")


def test_importing_without_admin_rights_is_a_finding(
    source_db: str, target_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "acme.json"
    assert main(["export", "acme", "--out", str(out), "--db", source_db]) == 0
    stranger = tmp_path / "stranger.key"
    assert main(["keygen", "--out", str(stranger)]) == 0
    capsys.readouterr()
    assert main(["import", str(out), "--key-file", str(stranger), "--db", target_db]) == 1
    assert capsys.readouterr().out.startswith(f"{out}: FORBIDDEN ")


def test_bad_usage_exits_2(target_db: str, key: str, tmp_path: Path) -> None:
    assert main(["export", "Not A Namespace", "--db", target_db]) == 2
    missing = str(tmp_path / "missing.json")
    assert main(["import", missing, "--key-file", key, "--db", target_db]) == 2
    package = tmp_path / "p.json"
    package.write_text('{"format": "stateward.package/1"}')
    assert main(["import", str(package), "--key-file", missing, "--db", target_db]) == 2


def test_export_with_dependencies_imports_alone_and_without_names_what_is_missing(
    source_db: str, target_db: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare, full = tmp_path / "bare.json", tmp_path / "full.json"
    capsys.readouterr()
    assert main(["export", "acme/sales", "--out", str(bare), "--db", source_db]) == 0
    assert "depends on workflow acme/billing/invoice" in capsys.readouterr().err
    assert json.loads(bare.read_text())["dependencies"] == [
        {"kind": "workflow", "path": INVOICE["$path"]}
    ]
    assert main(["import", str(bare), "--key-file", key, "--db", target_db]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"{bare}: UNRESOLVED_SPAWN #/dependencies/0 ")
    assert "acme/billing/invoice" in first
    argv = ["export", "acme/sales", "--with-dependencies", "--out", str(full), "--db", source_db]
    assert main(argv) == 0
    assert main(["import", str(full), "--key-file", key, "--db", target_db]) == 0
    assert "acme/billing/invoice v1" in capsys.readouterr().err
