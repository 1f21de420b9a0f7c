"""Every workflow definition shown in the documentation is a real file that validates.

A page shows a definition by including the file (`--8<-- "examples/…json"` or
`--8<-- "docs/snippets/…json"` inside a ```json fence), never by pasting it, so the page
and the file cannot differ; and every such file passes `stateward validate` with its
workspace (examples/ or docs/snippets/): no error, no warning.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md", ROOT / "examples/README.md"]
WORKSPACES = ("examples", "docs/snippets")
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)```", re.MULTILINE | re.DOTALL
)
INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<path>[^"]+)"\s*$', re.M)


def json_fences(page: Path) -> list[tuple[str, str]]:
    """(info string, body) of every ```json fence of a page."""
    if not page.exists():
        return []
    text = page.read_text(encoding="utf-8")
    return [(m["info"], m["body"]) for m in FENCE.finditer(text) if m["info"].startswith("json")]


def included_definitions() -> list[tuple[Path, Path]]:
    """(page, file) for every workflow file a page includes."""
    found = []
    for page in PAGES:
        for _info, body in json_fences(page):
            for m in INCLUDE.finditer(body):
                found.append((page, ROOT / m["path"]))
    return found


def test_no_page_pastes_a_workflow_definition() -> None:
    pasted = [
        str(page.relative_to(ROOT))
        for page in PAGES
        for _info, body in json_fences(page)
        if '"$version"' in body and not INCLUDE.search(body)
    ]
    assert not pasted, (
        f"pages with a pasted workflow definition: {pasted}; put it in a file under "
        'docs/snippets/<$path>.json and include it with --8<-- "docs/snippets/<$path>.json"'
    )


def test_every_included_definition_is_a_workspace_file() -> None:
    outside = [
        f"{page.relative_to(ROOT)}: {file.relative_to(ROOT)}"
        for page, file in included_definitions()
        if file.suffix == ".json" and not any(file.is_relative_to(ROOT / ws) for ws in WORKSPACES)
    ]
    assert not outside, f"included JSON outside {WORKSPACES}: {outside}"
    missing = [str(f) for _p, f in included_definitions() if not f.exists()]
    assert not missing, f"included files that do not exist: {missing}"


def test_the_docs_show_definitions_at_all() -> None:
    assert len(included_definitions()) >= 7


@pytest.mark.parametrize("workspace", WORKSPACES)
def test_every_workspace_validates_without_findings(workspace: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stateward.cli", "validate", workspace],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr


def test_every_include_line_is_well_formed() -> None:
    # A mangled include (`--8 < --"x"`, as a code formatter once wrote it) is not an error
    # for MkDocs: it would show the line instead of the file.
    bad = [
        f"{page.relative_to(ROOT)}: {line.strip()}"
        for page in PAGES
        if page.exists()
        for line in page.read_text(encoding="utf-8").splitlines()
        if "8 <" in line or ("8<" in line and "--8<--" in line and not INCLUDE.match(line))
    ]
    bad = [b for b in bad if "`--8<--" not in b and "`--8 < --" not in b]  # prose about it
    assert not bad, f"malformed includes: {bad}"
