"""`stateward deploy PATH... --key-file KEYFILE [--db URL]`: deploy through signed events.

Every change is a registry event signed by the key file's key (client-signed, not
attested): hook modules first (`<namespace>/<module>.star` under a folder given: namespace
= the folder's path relative to the workspace root, which `validate.folder_prefix` infers
for a subfolder, module = the file stem) with `add_module`/`update_module`,
then the workflow files (`<$path>.json` under a folder, or single files) with
`add_workflow` when the path is new and `update_workflow` when it exists. Content that is
already deployed unchanged is skipped, so running deploy twice changes nothing. Files
whose spawn targets are deployed later in the same run are retried after the others.

Findings on stdout as `path: CODE pointer message`; progress on stderr. Exit 0 when
everything was deployed, 1 on any finding, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stateward.commands.runtime_args import cli_runtime
from stateward.commands.validate import collect, folder_prefix, format_finding
from stateward.domain import errors
from stateward.domain.canonical import loads_strict, sha256_hex
from stateward.domain.errors import DomainError, Problem
from stateward.domain.versionhash import ordered_hash
from stateward.governance.keys import KeyPair, read_key_file
from stateward.observe.progress import Bar, progress
from stateward.runtime.access import references, registry
from stateward.runtime.core.services import Runtime


@dataclass
class _Pending:
    path: Path
    target: str | None
    definition: dict[str, Any]
    problems: list[Problem] = field(default_factory=list)


def _problems(exc: DomainError) -> list[Problem]:
    return list(exc.problems) or [Problem(exc.code, exc.message, exc.pointer)]


async def _deploy_modules(runtime: Runtime, key: KeyPair, roots: list[Path]) -> list[str]:
    findings = []
    for root in roots:
        for star in sorted(root.rglob("*.star")):
            prefix, rel = folder_prefix(root), star.parent.relative_to(root).as_posix()
            namespace = rel if not prefix else prefix if rel == "." else f"{prefix}/{rel}"
            name = star.stem
            if namespace == ".":
                findings.append(
                    format_finding(
                        str(star),
                        Problem(
                            errors.INVALID_PATH, "a module must sit in its namespace's folder", ""
                        ),
                    )
                )
                continue
            source = star.read_text(encoding="utf-8")
            async with runtime.uow(readonly=True) as uow:
                existing = await uow.modules.get(namespace, name)
            if existing is not None and existing.hash == sha256_hex(source.encode("utf-8")):
                print(f"deploy: module {namespace}/{name} unchanged", file=sys.stderr)
                continue
            update = existing is not None
            deploy = registry.update_module if update else registry.add_module
            try:
                await deploy(runtime, key, namespace, name, source)
            except DomainError as exc:
                findings.extend(format_finding(str(star), p) for p in _problems(exc))
                continue
            print(
                f"deploy: module {namespace}/{name} {'updated' if update else 'added'}",
                file=sys.stderr,
            )
    return findings


async def _deploy_one(runtime: Runtime, key: KeyPair, item: _Pending) -> None:
    path = item.definition.get("$path")
    current = await registry.get_workflow(runtime, path) if isinstance(path, str) else None
    if current is not None and current.definition.hash == ordered_hash(item.definition):
        print(f"deploy: {path} unchanged (v{current.version})", file=sys.stderr)
        return
    deploy = registry.update_workflow if current is not None else registry.deploy_workflow
    granted = await references.grant_references(runtime, key, item.definition)
    if granted:
        print(f"deploy: {path}: {granted} cross-namespace grant(s) signed", file=sys.stderr)
    await deploy(runtime, key, item.definition, item.target)
    version = (current.version + 1) if current is not None else 1
    print(f"deploy: {path} v{version}", file=sys.stderr)


async def _deploy_workflows(runtime: Runtime, key: KeyPair, pending: list[_Pending]) -> list[str]:
    """Deploy in rounds: a file refused only for UNRESOLVED_SPAWN waits for the others."""
    findings: list[str] = []
    with progress("deploy", total=len(pending)) as bar:
        findings = await _rounds(runtime, key, pending, bar)
    return findings


async def _rounds(runtime: Runtime, key: KeyPair, pending: list[_Pending], bar: Bar) -> list[str]:
    findings: list[str] = []
    while pending:
        waiting: list[_Pending] = []
        for item in pending:
            try:
                await _deploy_one(runtime, key, item)
                bar.advance()
            except DomainError as exc:
                item.problems = _problems(exc)
                if {p.code for p in item.problems} == {errors.UNRESOLVED_SPAWN}:
                    waiting.append(item)
                else:
                    findings.extend(format_finding(str(item.path), p) for p in item.problems)
                    bar.advance()
        if len(waiting) == len(pending):
            for item in waiting:
                findings.extend(format_finding(str(item.path), p) for p in item.problems)
            break
        pending = waiting
    return findings


def _read(files: list[Any]) -> tuple[list[_Pending], list[str]]:
    pending: list[_Pending] = []
    findings: list[str] = []
    for item in files:
        try:
            value = loads_strict(item.path.read_bytes())
        except DomainError as exc:
            findings.extend(format_finding(str(item.path), p) for p in _problems(exc))
            continue
        except OSError as exc:
            findings.append(
                format_finding(str(item.path), Problem(errors.INVALID_JSON, str(exc), ""))
            )
            continue
        if not isinstance(value, dict):
            findings.append(
                format_finding(
                    str(item.path),
                    Problem(
                        errors.NOT_AN_OBJECT, "a workflow definition must be a JSON object", ""
                    ),
                )
            )
            continue
        pending.append(_Pending(item.path, item.target, value))
    return pending, findings


async def _deploy(args: argparse.Namespace, key: KeyPair, files: list[Any]) -> list[str]:
    roots = [Path(p) for p in args.paths if Path(p).is_dir()]
    pending, findings = _read(files)
    async with cli_runtime(args) as runtime:
        findings += await _deploy_modules(runtime, key, roots)
        findings += await _deploy_workflows(runtime, key, pending)
    return findings


def run(args: argparse.Namespace) -> int:
    """Deploy the given files and folders; 0 when all went in, 1 on findings, 2 misuse."""
    files, _modules, missing = collect(list(args.paths))
    if missing:
        for given in missing:
            print(f"deploy: no such file or directory: {given}", file=sys.stderr)
        return 2
    try:
        key = read_key_file(args.key_file)
    except DomainError as exc:
        print(f"deploy: {exc.message}", file=sys.stderr)
        return 2
    try:
        findings = asyncio.run(_deploy(args, key, files))
    except (DomainError, ValueError, OSError) as exc:
        print(f"deploy: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    for line in findings:
        print(line)
    return 1 if findings else 0
