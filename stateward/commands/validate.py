"""`stateward validate PATH...`: validate workflow files, or folders of `*.json` (DESIGN §11).

Findings go to stdout, one per line: `path: CODE pointer message`, where `pointer` is the
RFC 6901 pointer in its URI-fragment form (`#` is the whole document, `#/states/my%20state`
a key with a space), so it never holds whitespace and the line splits on its first three
spaces. Warnings use the same shape with the message starting `warning: `. `--json` prints one
JSON report instead. Exit 0 when there is no error (warnings allowed), 1 on any error, 2 on
bad usage (a path that does not exist).

The files form one set: their `$path`s count as deployed for spawn targets, a `$path` used
twice is DUPLICATE_PATH, and inside a folder a file must be named `<$path>.json` relative to
the workspace root (else TARGET_MISMATCH). A folder may be the root itself or a subfolder of
it (`stateward validate examples/intake`): the root is inferred from the files' `$path`s, as
the ancestor of the folder that makes most of them match their location (see `folder_prefix`).
Hook modules are the `*.star` files of the folders given (`<namespace>/<module>.star`, the
namespace relative to that root); they are checked only when at least one folder is given.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from stateward.domain import errors
from stateward.domain.definition import ValidationReport, validate_definition
from stateward.domain.errors import Problem
from stateward.domain.lint import spawn_entries
from stateward.domain.rawjson import parse_json_text


@dataclass
class WorkflowFile:
    """One file of the set: where it is, what it claims to be, and what was found."""

    path: Path
    target: str | None  # `<$path>` its folder location implies; None for a file given alone
    text: str | None = None
    workflow: str | None = None
    problems: list[Problem] = field(default_factory=list)


def display_pointer(pointer: str) -> str:
    """An RFC 6901 pointer in URI-fragment form (`#`, `#/states/a%20b`): no whitespace."""
    return "#" + quote(pointer, safe="/~$!&'()*+,;=:@-._")


def format_finding(path: str, problem: Problem) -> str:
    """One output line `path: CODE pointer message` (warnings: message starts `warning: `)."""
    prefix = "warning: " if problem.severity == "warning" else ""
    message = " ".join(problem.message.split())
    return f"{path}: {problem.code} {display_pointer(problem.pointer)} {prefix}{message}"


def _declared_path(file: Path) -> str | None:
    """The `$path` a workflow file declares, or None when it has none (or is unreadable)."""
    try:
        value, _ = parse_json_text(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    path = value.get("$path") if isinstance(value, dict) else None
    return path if isinstance(path, str) else None


def folder_prefix(folder: Path) -> str:
    """Where `folder` sits in its workspace: "" when it is the root, else the namespace it
    stands for (`intake` for `examples/intake`).

    Each `*.json` below the folder votes for the prefix its `$path` implies (`$path` minus
    the file's relative location), counted only when that prefix is also the folder's own
    trailing path (so a stray file never moves the root). The most voted prefix wins; a tie
    goes to the shortest, and no vote means the folder is the root. Files that disagree with
    the chosen prefix are then reported as TARGET_MISMATCH, as before.
    """
    tail = folder.resolve().parts
    votes: dict[str, int] = {}
    for file in sorted(folder.rglob("*.json")):
        declared = _declared_path(file)
        rel = file.relative_to(folder).with_suffix("").as_posix()
        if declared is None:
            continue
        if declared == rel:
            votes[""] = votes.get("", 0) + 1
        elif declared.endswith("/" + rel):
            prefix = declared[: -len(rel) - 1]
            parts = tuple(prefix.split("/"))
            if len(parts) < len(tail) and tail[-len(parts) :] == parts:
                votes[prefix] = votes.get(prefix, 0) + 1
    if not votes:
        return ""
    return min(votes, key=lambda prefix: (-votes[prefix], len(prefix), prefix))


def workspace_root(folder: Path, prefix: str) -> Path:
    """The workspace root of a folder whose namespace prefix is `prefix`."""
    root = folder.resolve()
    for _ in prefix.split("/") if prefix else ():
        root = root.parent
    return root


def workspace_workflows(root: Path) -> set[str]:
    """The `$path`s of the workspace's files that sit where their `$path` says: spawn targets
    outside a validated subfolder resolve against them, as they would once deployed."""
    found = set()
    for file in root.rglob("*.json"):
        rel = file.relative_to(root).with_suffix("").as_posix()
        if _declared_path(file) == rel:
            found.add(rel)
    return found


def _join(prefix: str, rel: str) -> str:
    return f"{prefix}/{rel}" if prefix else rel


def collect(paths: list[str]) -> tuple[list[WorkflowFile], set[str] | None, list[str]]:
    """The files named or found under folders, the hook modules of the folders (None when
    no folder is given) and the paths that do not exist."""
    files: dict[Path, WorkflowFile] = {}
    modules: set[str] | None = None
    missing: list[str] = []
    for given in paths:
        root = Path(given)
        if root.is_dir():
            prefix = folder_prefix(root)
            workspace = workspace_root(root, prefix)
            modules = modules or set()
            modules.update(  # every module of the workspace: hooks may name other namespaces
                p.relative_to(workspace).with_suffix("").as_posix()
                for p in sorted(workspace.rglob("*.star"))
            )
            for file in sorted(root.rglob("*.json")):
                target = _join(prefix, file.relative_to(root).with_suffix("").as_posix())
                files.setdefault(file.resolve(), WorkflowFile(file, target))
        elif root.is_file():
            files.setdefault(root.resolve(), WorkflowFile(root, None))
        else:
            missing.append(given)
    return list(files.values()), modules, missing


def _read(item: WorkflowFile) -> None:
    try:
        item.text = item.path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        item.problems.append(Problem(errors.INVALID_JSON, f"cannot read the file: {exc}", ""))
        return
    value, _ = parse_json_text(item.text)
    if isinstance(value, dict) and isinstance(value.get("$path"), str):
        item.workflow = value["$path"]


def validate_files(
    files: list[WorkflowFile], modules: set[str] | None, workspace: Iterable[str] = ()
) -> None:
    """Validate every file of the set in place (spawn targets, duplicates, file names).

    `workspace` holds the `$path`s of the rest of the workspace (files outside the folders
    given), which count as deployed for spawn targets."""
    for item in files:
        _read(item)
    deployed = {item.workflow for item in files if item.workflow} | set(workspace)
    # States other files' spawns start a workflow in count as its entries.
    sources = [parse_json_text(item.text)[0] for item in files if item.text is not None]
    first: dict[str, Path] = {}
    for item in files:
        if item.text is None:
            continue
        report: ValidationReport = validate_definition(
            item.text,
            deployed=deployed,
            target=item.target if item.workflow else None,
            modules=modules.__contains__ if modules is not None else None,
            spawned_into=spawn_entries(sources, item.workflow) if item.workflow else (),
        )
        item.problems.extend(_with_file_name(report.errors, item))
        if item.workflow is not None:
            if item.workflow in first:
                item.problems.append(
                    Problem(
                        errors.DUPLICATE_PATH,
                        f"$path {item.workflow!r} is also declared by {first[item.workflow]}",
                        "/$path",
                    )
                )
            first.setdefault(item.workflow, item.path)
        item.problems.extend(report.warnings)


def _with_file_name(problems: tuple[Problem, ...], item: WorkflowFile) -> list[Problem]:
    """Say "file name" rather than "deployment target" for a folder's TARGET_MISMATCH."""
    return [
        Problem(
            p.code,
            f"file name {item.target}.json does not match $path {item.workflow!r} "
            f"(a file in a folder must be named <$path>.json)",
            p.pointer,
        )
        if p.code == errors.TARGET_MISMATCH
        else p
        for p in problems
    ]


def _json_report(files: list[WorkflowFile]) -> dict[str, Any]:
    entries = []
    for item in files:
        errs = [p.as_dict() for p in item.problems if p.severity == "error"]
        warns = [p.as_dict() for p in item.problems if p.severity == "warning"]
        entries.append(
            {
                "file": str(item.path),
                "workflow": item.workflow,
                "valid": not errs,
                "errors": errs,
                "warnings": warns,
            }
        )
    return {"valid": all(e["valid"] for e in entries), "files": entries}


def run(args: argparse.Namespace) -> int:
    """Validate the given files and folders; print findings; return the exit code."""
    files, modules, missing = collect(list(args.paths))
    if missing:
        for given in missing:
            print(f"stateward validate: no such file or directory: {given}", file=sys.stderr)
        return 2
    workspace: set[str] = set()
    for given in args.paths:
        folder = Path(given)
        if folder.is_dir() and (prefix := folder_prefix(folder)):
            workspace |= workspace_workflows(workspace_root(folder, prefix))
    validate_files(files, modules, workspace)
    n_errors = sum(p.severity == "error" for item in files for p in item.problems)
    n_warnings = sum(p.severity == "warning" for item in files for p in item.problems)
    if getattr(args, "json", False):
        print(json.dumps(_json_report(files), indent=2))
    else:
        for item in files:
            for problem in item.problems:
                print(format_finding(str(item.path), problem))
    print(
        f"validated {len(files)} file(s): {n_errors} error(s), {n_warnings} warning(s)",
        file=sys.stderr,
    )
    return 1 if n_errors else 0
