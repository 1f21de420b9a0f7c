"""Generated pages of the documentation site, built from the code so they cannot drift.

Used two ways:
- as a MkDocs hook (`hooks: [tools/docsgen.py]` in mkdocs.yml): `on_files` adds the pages
  `reference/cli-help.md` (every command's `--help`, from `stateward.cli.build_parser`) and
  `reference/graphql-schema.md` (every type, field and argument of `docs/schema.graphql`,
  with its description) to the build, so they exist only in the built site;
- by tests (`tests/docs/`), which import `cli_help_markdown` / `schema_markdown`.

Nothing here is part of the `stateward` package: it runs at documentation build time only.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLUnionType,
    build_schema,
)

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "docs" / "schema.graphql"
CLI_PAGE = "reference/cli-help.md"
SCHEMA_PAGE = "reference/graphql-schema.md"
HELP_WIDTH = "96"


@contextlib.contextmanager
def _columns(width: str) -> Iterator[None]:
    """argparse wraps help to $COLUMNS: fix it so the page does not depend on the terminal."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = width
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def cli_commands() -> list[str]:
    """The subcommands `stateward` has, in the order `stateward --help` lists them."""
    from stateward.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return list(sub.choices)  # type: ignore[arg-type]


def cli_help_markdown() -> str:
    """`stateward --help` and `stateward COMMAND --help` of every command, as one page."""
    from stateward.cli import build_parser

    with _columns(HELP_WIDTH):
        parser = build_parser()
        sub = next(a for a in parser._actions if a.dest == "command")
        parts = [
            "# Command line help\n",
            "Generated at build time from `stateward --help` and `stateward COMMAND --help`",
            "(`tools/docsgen.py`), so it always matches the code. What each command is for,",
            "and when to use it, is in [Command line](cli.md).\n",
            "## stateward\n",
            "```text\n" + parser.format_help().rstrip() + "\n```\n",
        ]
        for name, command in sub.choices.items():  # type: ignore[union-attr]
            parts.append(f"## stateward {name}\n")
            parts.append("```text\n" + command.format_help().rstrip() + "\n```\n")
    return "\n".join(parts)


def _cell(text: str | None) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join((text or "").split()).replace("|", "\\|")


def _type_link(type_: Any) -> str:
    """`[Instance!]!` with the named type linked to its section."""
    text = str(type_)
    named = text.strip("[]!")
    return text.replace(named, f"[{named}](#{named.lower()})", 1)


def _fields_table(fields: dict[str, Any], *, arguments: bool) -> list[str]:
    rows = ["| Field | Type | Description |", "| --- | --- | --- |"]
    for name, field in fields.items():
        label = f"`{name}`"
        args = getattr(field, "args", None) if arguments else None
        if args:
            label += "(" + ", ".join(f"`{a}`: {_type_link(v.type)}" for a, v in args.items()) + ")"
        description = _cell(field.description)
        if getattr(field, "deprecation_reason", None):
            description += f" *Deprecated: {_cell(field.deprecation_reason)}*"
        rows.append(f"| {label} | {_type_link(field.type)} | {description} |")
    return rows


def schema_markdown(sdl: str | None = None) -> str:
    """A reference page of the GraphQL schema: root operations first, then every type."""
    schema = build_schema(sdl if sdl is not None else SCHEMA.read_text(encoding="utf-8"))
    roots = [t for t in (schema.query_type, schema.mutation_type, schema.subscription_type) if t]
    others = sorted(
        (t for n, t in schema.type_map.items() if not n.startswith("__") and t not in roots),
        key=lambda t: t.name,
    )
    out = [
        "# GraphQL schema\n",
        "Generated at build time from `docs/schema.graphql` (itself generated from the code:",
        "`python -m stateward.schema.export`), so it always matches the server. Errors and",
        "their codes are in [Error codes](errors.md).\n",
    ]
    for type_ in [*roots, *others]:
        kind = _kind(type_)
        out.append(f"## {type_.name}\n")
        out.append(f"*{kind}*" + (f": {_cell(type_.description)}" if type_.description else ""))
        out.append("")
        if isinstance(type_, GraphQLObjectType | GraphQLInterfaceType):
            if getattr(type_, "interfaces", None):
                out.append("Implements " + ", ".join(_type_link(i) for i in type_.interfaces))
                out.append("")
            out.extend(_fields_table(type_.fields, arguments=True))
        elif isinstance(type_, GraphQLInputObjectType):
            out.extend(_fields_table(type_.fields, arguments=False))
        elif isinstance(type_, GraphQLEnumType):
            out.append("| Value | Description |")
            out.append("| --- | --- |")
            for name, value in type_.values.items():
                out.append(f"| `{name}` | {_cell(value.description)} |")
        elif isinstance(type_, GraphQLUnionType):
            out.append("One of " + ", ".join(_type_link(t) for t in type_.types))
        out.append("")
    return "\n".join(out)


def _kind(type_: Any) -> str:
    for cls, name in (
        (GraphQLObjectType, "object"),
        (GraphQLInterfaceType, "interface"),
        (GraphQLInputObjectType, "input"),
        (GraphQLEnumType, "enum"),
        (GraphQLUnionType, "union"),
        (GraphQLScalarType, "scalar"),
    ):
        if isinstance(type_, cls):
            return name
    return "type"


def generated_pages() -> dict[str, str]:
    """Every generated page: site path -> Markdown."""
    return {CLI_PAGE: cli_help_markdown(), SCHEMA_PAGE: schema_markdown()}


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated pages to the build (they are never written to docs/)."""
    from mkdocs.structure.files import File

    for path, content in generated_pages().items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=content))
    return files
