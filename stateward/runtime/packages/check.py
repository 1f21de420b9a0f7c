"""Validation of a package (`stateward.package/1`) before anything of it is deployed.

A package is `{"format": "stateward.package/1", "namespace"?: str, "workflows": [definition
objects as authored], "modules": [{namespace, name, source, hash?}], "dependencies"?:
[{kind: "workflow"|"module", path}]}` (what it refers to but does not hold, issue 15).
`check_package` reports every problem at once, each with an RFC 6901 pointer into the package
(`/workflows/3/states/review/assign`, `/modules/0/source`): the format, DUPLICATE_PATH
inside the set (workflow paths, module names per namespace), each definition validated
with the package's own paths and the deployed ones as spawn targets and the package's
modules plus the deployed ones as hook modules, each module checked like `add_module`.
It does no I/O: the caller passes what is deployed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from stateward.domain import errors
from stateward.domain.canonical import sha256_hex
from stateward.domain.definition import validate_definition
from stateward.domain.errors import Problem
from stateward.domain.paths import is_canonical_path, is_namespace, resolve_hook, split_path
from stateward.domain.rawjson import parse_json_text
from stateward.runtime.hooks.module import check_module

FORMAT = "stateward.package/1"
KEYS = frozenset({"format", "namespace", "workflows", "modules", "dependencies"})
DEPENDENCY_KINDS = ("workflow", "module")
MODULE_KEYS = frozenset({"namespace", "name", "source", "hash"})


@dataclass(frozen=True)
class PackageModule:
    """One Starlark module of a package."""

    namespace: str
    name: str
    source: str
    hash: str

    @property
    def path(self) -> str:
        """`namespace/name`, the module path hooks resolve to."""
        return f"{self.namespace}/{self.name}"

    def as_dict(self) -> dict[str, str]:
        """The package form `{namespace, name, source, hash}`."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "source": self.source,
            "hash": self.hash,
        }


@dataclass(frozen=True)
class Package:
    """A package that passed the shape checks: its workflow sources and modules."""

    workflows: tuple[Mapping[str, Any], ...]
    modules: tuple[PackageModule, ...]
    #: What the package refers to but does not hold (issue 15): `{"kind", "path"}` each.
    dependencies: tuple[Mapping[str, str], ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        """The `$path` of every workflow (only meaningful once the package is valid)."""
        return tuple(str(w.get("$path")) for w in self.workflows)

    def namespaces(self) -> set[str]:
        """Every namespace the package deploys into (workflows and modules)."""
        found = {m.namespace for m in self.modules}
        found.update(split_path(p)[0] for p in self.paths if is_canonical_path(p))
        return found


def parse_package(package: str | bytes | Mapping[str, Any]) -> tuple[Package, list[Problem]]:
    """Parse (JSON text: duplicate keys anywhere are DUPLICATE_KEY) and shape-check a
    package; returns what could be read and the problems found so far."""
    problems: list[Problem] = []
    value: Any = package
    if isinstance(package, (str, bytes)):
        text = package.decode("utf-8", "replace") if isinstance(package, bytes) else package
        value, problems = parse_json_text(text)
    empty = Package((), ())
    if not isinstance(value, Mapping):
        if value is not None:
            problems.append(Problem(errors.NOT_AN_OBJECT, "a package must be a JSON object", ""))
        return empty, problems
    if value.get("format") != FORMAT:
        what = "missing" if "format" not in value else f"{value.get('format')!r} is not supported"
        problems.append(
            Problem(errors.UNSUPPORTED_VERSION, f"package format {what}; use {FORMAT!r}", "/format")
        )
    for key in value:
        if key not in KEYS:
            problems.append(
                Problem(
                    errors.INVALID_FIELD, f"unknown package field {key!r}", f"/{_escape(str(key))}"
                )
            )
    if "namespace" in value and not is_namespace(value["namespace"]):
        problems.append(
            Problem(errors.INVALID_PATH, "`namespace` must be a namespace path", "/namespace")
        )
    workflows = _list(value, "workflows", problems)
    modules = [
        _module(item, i, problems) for i, item in enumerate(_list(value, "modules", problems))
    ]
    dependencies = [
        _dependency(item, i, problems)
        for i, item in enumerate(_list(value, "dependencies", problems))
    ]
    return Package(
        tuple(workflows),
        tuple(m for m in modules if m is not None),
        tuple(d for d in dependencies if d is not None),
    ), problems


def _dependency(item: Any, index: int, problems: list[Problem]) -> Mapping[str, str] | None:
    """One `dependencies` entry `{"kind": "workflow"|"module", "path": "<ns>/<name>"}`."""
    at = f"/dependencies/{index}"
    if (
        not isinstance(item, Mapping)
        or set(item) != {"kind", "path"}
        or item["kind"] not in DEPENDENCY_KINDS
        or not is_canonical_path(item["path"])
    ):
        problems.append(
            Problem(
                errors.INVALID_FIELD,
                'a dependency is {"kind": "workflow" or "module", "path": "<namespace>/<name>"}',
                at,
            )
        )
        return None
    return {"kind": str(item["kind"]), "path": str(item["path"])}


def check_package(
    package: Package,
    *,
    deployed: Collection[str],
    deployed_modules: Callable[[str], bool],
) -> list[Problem]:
    """Every problem of a parsed package: duplicates, definitions, modules (see module doc).

    `deployed`: workflow paths already live (spawn targets); `deployed_modules(path)`: does
    module `namespace/name` exist already (hook targets).
    """
    problems: list[Problem] = []
    own_modules = {m.path for m in package.modules}
    seen_modules: dict[str, int] = {}
    for i, module in enumerate(package.modules):
        base = f"/modules/{i}"
        if module.path in seen_modules:
            problems.append(
                Problem(
                    errors.DUPLICATE_PATH,
                    f"module {module.path} is already in the package at "
                    f"/modules/{seen_modules[module.path]}",
                    f"{base}/name",
                )
            )
        seen_modules.setdefault(module.path, i)
        problems.extend(_prefixed(check_module(module.source, module.name), base))
    targets = set(deployed)
    targets.update(p for p in package.paths if is_canonical_path(p))
    seen: dict[str, int] = {}
    for i, source in enumerate(package.workflows):
        base = f"/workflows/{i}"
        if not isinstance(source, Mapping):
            problems.append(
                Problem(errors.NOT_AN_OBJECT, "a workflow definition must be a JSON object", base)
            )
            continue
        path = source.get("$path")
        if isinstance(path, str) and path in seen:
            problems.append(
                Problem(
                    errors.DUPLICATE_PATH,
                    f"$path {path} is already in the package at /workflows/{seen[path]}",
                    f"{base}/$path",
                )
            )
        elif isinstance(path, str):
            seen[path] = i
        report = validate_definition(
            source,
            deployed=targets,
            modules=lambda p: p in own_modules or deployed_modules(p),
        )
        problems.extend(_prefixed(report.errors, base))
    return problems


def hook_namespaces(package: Package) -> set[str]:
    """Namespaces whose modules the package's hooks name (to load what is deployed)."""
    found: set[str] = set()
    for source in package.workflows:
        path = source.get("$path") if isinstance(source, Mapping) else None
        states = source.get("states") if isinstance(source, Mapping) else None
        if not is_canonical_path(path) or not isinstance(states, Mapping):
            continue
        for state in states.values():
            hook = state.get("hook") if isinstance(state, Mapping) else None
            resolved = (
                resolve_hook(hook, split_path(str(path))[0]) if isinstance(hook, str) else None
            )
            if resolved is not None and "/" in resolved[0]:
                found.add(resolved[0].rsplit("/", 1)[0])
    return found


def _list(value: Mapping[str, Any], key: str, problems: list[Problem]) -> list[Any]:
    """`value[key]` when it is a list (absent = empty), else INVALID_FIELD and []."""
    items = value.get(key, [])
    if isinstance(items, list):
        return items
    problems.append(Problem(errors.INVALID_FIELD, f"`{key}` must be a list", f"/{key}"))
    return []


def _module(item: Any, index: int, problems: list[Problem]) -> PackageModule | None:
    """A module entry, or None (with problems) when its shape is wrong."""
    base = f"/modules/{index}"
    if not isinstance(item, Mapping):
        problems.append(Problem(errors.NOT_AN_OBJECT, "a module must be an object", base))
        return None
    found = len(problems)
    for key in item:
        if key not in MODULE_KEYS:
            problems.append(
                Problem(
                    errors.INVALID_FIELD,
                    f"unknown module field {key!r}",
                    f"{base}/{_escape(str(key))}",
                )
            )
    namespace, name, source = item.get("namespace"), item.get("name"), item.get("source")
    if not is_namespace(namespace):
        problems.append(
            Problem(
                errors.INVALID_PATH, "`namespace` must be a namespace path", f"{base}/namespace"
            )
        )
    for key, val in (("name", name), ("source", source)):
        if not isinstance(val, str):
            problems.append(
                Problem(errors.INVALID_FIELD, f"`{key}` must be a string", f"{base}/{key}")
            )
    if len(problems) > found:
        return None
    digest = sha256_hex(str(source).encode("utf-8"))
    if "hash" in item and item["hash"] != digest:
        problems.append(
            Problem(errors.INVALID_FIELD, "`hash` is not the sha256 of `source`", f"{base}/hash")
        )
    return PackageModule(str(namespace), str(name), str(source), digest)


def _prefixed(problems: Collection[Problem], base: str) -> list[Problem]:
    """`problems` with their pointers moved under `base`."""
    return [Problem(p.code, p.message, f"{base}{p.pointer}", p.severity) for p in problems]


def _escape(key: str) -> str:
    """An object key as one RFC 6901 reference token."""
    return key.replace("~", "~0").replace("/", "~1")
