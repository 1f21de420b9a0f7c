"""The documentation site builds in strict mode, offline, with its generated pages.

This is the same build as `make docs` (into a temporary folder): a broken link, a missing
page, a missing snippet file or any other MkDocs warning fails it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from graphql import build_schema

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=["'](?:https?:)?//""")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        pytest.fail("mkdocs is not installed: `pip install -e '.[dev]'` installs it")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_the_site_builds_strict_with_every_page(site: Path) -> None:
    for page in ("index.html", "concepts.html", "reference/errors.html", "reference/cli.html"):
        assert (site / page).is_file(), page


def test_every_include_was_replaced_by_its_file(site: Path) -> None:
    leftovers = [
        str(page.relative_to(site))
        for page in site.rglob("*.html")
        if "--8&lt;--" in (text := page.read_text(encoding="utf-8")) or "8 &lt; --" in text
    ]
    assert not leftovers, f"pages showing an include line instead of the file: {leftovers}"
    hooks = (site / "reference/hooks.html").read_text(encoding="utf-8")
    assert "LIMITS" in hooks  # a line of docs/snippets/acme/purchasing/checks.star


def test_no_page_loads_anything_from_another_host(site: Path) -> None:
    offenders = [
        str(page.relative_to(site))
        for page in site.rglob("*.html")
        if EXTERNAL.search(page.read_text(encoding="utf-8"))
    ]
    assert not offenders, f"pages loading remote scripts, styles or fonts: {offenders}"
    assert (site / "assets/javascripts/mermaid.min.js").is_file()


def test_the_cli_help_page_is_generated_with_every_command(site: Path) -> None:
    from stateward.cli import build_parser

    page = (site / "reference/cli-help.html").read_text(encoding="utf-8")
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():  # type: ignore[union-attr]
        assert f"stateward {name}" in page
        first_option = next(
            (o for a in parser._actions for o in a.option_strings if o.startswith("--")), None
        )
        if first_option and first_option != "--help":
            assert first_option in page, (name, first_option)


def test_the_schema_page_is_generated_with_every_type_and_root_field(site: Path) -> None:
    page = (site / "reference/graphql-schema.html").read_text(encoding="utf-8")
    schema = build_schema((ROOT / "docs/schema.graphql").read_text(encoding="utf-8"))
    for name in schema.type_map:
        if not name.startswith("__"):
            assert f'id="{name.lower()}"' in page, name
    for root in (schema.query_type, schema.mutation_type, schema.subscription_type):
        assert root is not None
        for field in root.fields:
            assert f"<code>{field}</code>" in page, field
