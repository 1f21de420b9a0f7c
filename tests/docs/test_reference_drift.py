"""The reference pages list exactly what the code has: settings, CLI commands, error codes.

Each test compares a set read from the code with the set a reference page lists, both ways,
and its failure message names each missing item and the page (and table) to fix.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = ROOT / "stateward"
REFERENCE = ROOT / "docs" / "reference"
SETTINGS_PAGE = REFERENCE / "settings.md"
CLI_PAGE = REFERENCE / "cli.md"
ERRORS_PAGE = REFERENCE / "errors.md"

SETTING = re.compile(r"STATEWARD_[A-Z0-9_]+")
CODE_SHAPE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
#: UPPER_SNAKE string literals of the code that are not error codes (environment variables
#: of other programs, regex opcodes). Add a literal here only when it is not a code.
NOT_CODES = frozenset(
    {"LC_ALL", "RUST_BACKTRACE", "XDG_DATA_HOME", "MAX_REPEAT", "MIN_REPEAT", "NOT_LITERAL",
     "POSSESSIVE_REPEAT",
     # orderBy fields of instance search (GraphQL enum values), not error codes
     "STATE_ENTERED", "SLA_DUE",
     # incident kinds (GraphQL `IncidentKind`, issue 15), not error codes
     "CYCLE_GUARD", "TIMER_FAILED", "WEBHOOK_EXHAUSTED", "WORKFLOW_ERROR"}
)  # fmt: skip


#: Environment variables of other programs (OpenTelemetry, prometheus-client) and our own
#: settings (checked against the settings page instead).
FOREIGN_PREFIXES = ("STATEWARD_", "OTEL_", "PROMETHEUS_")


def _python_files() -> list[Path]:
    return sorted(CODE.rglob("*.py"))


def _table_names(page: Path) -> set[str]:
    """The first-column names of every table row of a page (`| \\`NAME\\` | ...`)."""
    text = page.read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([^`]+)` \|", text, re.MULTILINE))


def _missing_message(kind: str, names: set[str], where: str) -> str:
    listed = ", ".join(sorted(names))
    return f"{kind} {listed}: {where}"


def settings_in_code() -> set[str]:
    """Every STATEWARD_* name that the package's source mentions."""
    found: set[str] = set()
    for file in _python_files():
        found.update(SETTING.findall(file.read_text(encoding="utf-8")))
    return found


def _dunder_all(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names.update(
                e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)
            )  # fmt: skip
    return names


def error_codes_in_code() -> set[str]:
    """Every error code the package defines.

    A code is (a) an UPPER_SNAKE string literal with at least one `_` anywhere in the
    package, other than `__all__` entries, `FOREIGN_PREFIXES` names and `NOT_CODES`; or (b) a
    module-level constant whose name equals its upper-case value (`CONFLICT = "CONFLICT"`),
    which catches one-word codes.
    """
    codes: set[str] = set()
    for file in _python_files():
        tree = ast.parse(file.read_text(encoding="utf-8"))
        exported = _dunder_all(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                value = node.value
                if (
                    CODE_SHAPE.match(value)
                    and value not in exported
                    and not value.startswith(FOREIGN_PREFIXES)
                    and value not in NOT_CODES
                ):
                    codes.add(value)
        for stmt in tree.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Constant)
                and stmt.value.value == stmt.targets[0].id
                and stmt.targets[0].id.isupper()
            ):
                codes.add(stmt.targets[0].id)
    return codes


def _string_literals() -> set[str]:
    found: set[str] = set()
    for file in _python_files():
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def cli_commands_in_code() -> set[str]:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from docsgen import cli_commands  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return set(cli_commands())


def test_every_setting_the_code_reads_is_in_the_settings_reference() -> None:
    documented = _table_names(SETTINGS_PAGE)
    missing = settings_in_code() - documented
    assert not missing, _missing_message(
        "settings read by the code but not documented:",
        missing,
        f"add a row `| \\`NAME\\` | default | flag | what it does |` to {SETTINGS_PAGE}",
    )


def test_every_documented_setting_exists() -> None:
    tests_text = "\n".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py")
    ) + (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    stale = {
        name
        for name in _table_names(SETTINGS_PAGE)
        if name.startswith("STATEWARD_") and name not in settings_in_code()
        and name not in tests_text
    }  # fmt: skip
    assert not stale, _missing_message(
        "settings documented but read nowhere:", stale, f"remove their rows from {SETTINGS_PAGE}"
    )


def test_every_cli_command_is_in_the_cli_reference_and_back() -> None:
    documented = {name for name in _table_names(CLI_PAGE) if re.fullmatch(r"[a-z-]+", name)}
    commands = cli_commands_in_code()
    assert not commands - documented, _missing_message(
        "commands of `stateward` not documented:",
        commands - documented,
        f"add a row `| \\`NAME\\` | what it is for |` to the table of {CLI_PAGE}",
    )
    assert not documented - commands, _missing_message(
        "commands documented but not in stateward/cli.py:",
        documented - commands,
        f"remove their rows from {CLI_PAGE}",
    )


def test_every_error_code_is_in_the_error_reference() -> None:
    missing = error_codes_in_code() - _table_names(ERRORS_PAGE)
    assert not missing, _missing_message(
        "error codes defined in the code but not documented:",
        missing,
        f"add a row `| \\`CODE\\` | cause | fix |` to the right table of {ERRORS_PAGE} "
        f"(or, if it is not an error code, add it to NOT_CODES in {Path(__file__).name})",
    )


def test_every_documented_error_code_exists_in_the_code() -> None:
    literals = _string_literals()
    stale = {c for c in _table_names(ERRORS_PAGE) if c not in literals}
    assert not stale, _missing_message(
        "error codes documented but not in the code:",
        stale,
        f"remove their rows from {ERRORS_PAGE}",
    )


def test_the_scanner_finds_codes_of_every_kind() -> None:
    # The rule above must keep seeing one-word codes, domain codes, transport codes and
    # hook codes, or the drift test would pass vacuously.
    codes = error_codes_in_code()
    assert {"CONFLICT", "FORBIDDEN", "GUARD_FAILED", "PAYLOAD_TOO_LARGE", "HOOK_TIMEOUT",
            "BAD_REQUEST", "FILTER_FAILED"} <= codes  # fmt: skip
    assert not {"MAX_DEPTH", "LC_ALL"} & codes
