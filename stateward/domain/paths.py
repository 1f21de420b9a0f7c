"""Workflow paths, namespaces, registry ids and hook references (DESIGN §2.1, §2.2, §6).

A workflow's identity is its canonical `$path`: lower-case segments `[a-z0-9][a-z0-9_-]*`
joined by `/`, at least two of them (namespace = dirname, name = basename). Shared by the
definition validator, governance (registry ids, deployment targets) and the runtime (hooks).
"""

from __future__ import annotations

import re

from stateward.domain import errors
from stateward.domain.errors import Problem

SEGMENT = re.compile(r"[a-z0-9][a-z0-9_-]*")
#: A namespace segment has no '-': registry ids replace '/' by '-', so `a-b` and `a/b`
#: would share one registry (`a-b-registry`). Without dashes the mapping is one-to-one.
NAMESPACE_SEGMENT = re.compile(r"[a-z0-9][a-z0-9_]*")
REGISTRY_SUFFIX = "-registry"
#: A basename ending in a version (`-v1`, `-V2`, `_v3`): identity must not carry versions.
VERSION_SUFFIX = re.compile(r"[-_][vV][0-9]+$")
FUNCTION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED_NAME = "bootstrap"
SYSTEM_NAMESPACE = "system"


def split_path(path: str) -> tuple[str, str]:
    """Split a workflow path into (namespace, name): its dirname and basename.

    `customer/retail/retail-customer` -> (`customer/retail`, `retail-customer`). A path
    without `/` has an empty namespace.
    """
    namespace, _, name = path.rpartition("/")
    return namespace, name


def _segments_ok(path: str, minimum: int) -> bool:
    parts = path.split("/")
    return len(parts) >= minimum and all(SEGMENT.fullmatch(p) for p in parts)


def is_canonical_path(path: object) -> bool:
    """True when `path` is a canonical workflow path (spawn targets, deployment targets).

    Canonical: a string of at least two lower-case segments `[a-z0-9][a-z0-9_-]*`, no
    leading/trailing `/`, no `..`, no `.json`, no basename version suffix.
    """
    if not isinstance(path, str) or not _segments_ok(path, 2):
        return False
    return VERSION_SUFFIX.search(split_path(path)[1]) is None


def is_namespace(namespace: object) -> bool:
    """True when `namespace` is one or more namespace segments (`system`,
    `customer/retail`): canonical segments without '-' (see `NAMESPACE_SEGMENT`)."""
    return isinstance(namespace, str) and all(
        NAMESPACE_SEGMENT.fullmatch(p) for p in namespace.split("/")
    )


def registry_id(namespace: str) -> str:
    """The process id of a namespace's registry: `/` -> `-`, plus `-registry` (DESIGN §6).

    `customer/retail` -> `customer-retail-registry`; `system` -> `system-registry`.
    One-to-one because namespaces have no '-'; ids ending in `-registry` are refused for
    instances (`is_registry_id`), so no instance can take a registry's id.
    """
    return namespace.replace("/", "-") + REGISTRY_SUFFIX


def is_registry_id(process_id: str) -> bool:
    """True for ids in the registry id space (`...-registry`): instances may not use them."""
    return process_id.endswith(REGISTRY_SUFFIX)


def is_reserved_path(path: str) -> bool:
    """True for `*/bootstrap` paths (`system/bootstrap` included): the built-in governance."""
    return split_path(path)[1] == RESERVED_NAME


def path_problems(path: str, pointer: str = "/$path") -> list[Problem]:
    """Every problem of a `$path` string: INVALID_PATH, VERSION_SUFFIX, RESERVED_PATH.

    A version suffix is reported alone when it is the only thing wrong (so `-V1` is a
    VERSION_SUFFIX, not also an INVALID_PATH for its capital letter).
    """
    found: list[Problem] = []
    name = split_path(path)[1]
    suffix = VERSION_SUFFIX.search(name)
    shape = path[: len(path) - len(suffix.group(0))] if suffix else path
    if suffix:
        found.append(
            Problem(
                errors.VERSION_SUFFIX,
                f"workflow name {name!r} ends in a version suffix {suffix.group(0)!r}; "
                "versions are tracked by the registry, not by the path",
                pointer,
            )
        )
    if not _segments_ok(shape, 2):
        found.append(
            Problem(
                errors.INVALID_PATH,
                f"$path {path!r} is not canonical: it needs at least two '/'-separated "
                "segments of lower-case letters, digits, '-' or '_' (no leading '/', "
                "no '..', no '.json')",
                pointer,
            )
        )
    namespace = split_path(path)[0]
    if _segments_ok(shape, 2) and not is_namespace(namespace):
        found.append(
            Problem(
                errors.AMBIGUOUS_NAMESPACE,
                f"namespace {namespace!r} contains '-': namespaces use '/' between segments "
                "and no '-' (its registry id would be shared with "
                f"{namespace.replace('-', '/')!r})",
                pointer,
            )
        )
    if name == RESERVED_NAME:
        found.append(
            Problem(
                errors.RESERVED_PATH,
                f"$path {path!r} is reserved: '*/bootstrap' is the built-in registry "
                "governance workflow",
                pointer,
            )
        )
    return found


def resolve_hook(hook: str, namespace: str) -> tuple[str, str] | None:
    """Resolve a hook reference to (module path, function name), or None when malformed.

    `module:function` names a Starlark module of the workflow's own namespace
    (`scoring:score` in `customer/retail` -> (`customer/retail/scoring`, `score`));
    `ns/path/module:function` names a module of another namespace.
    """
    module, sep, function = hook.partition(":")
    if not sep or not FUNCTION.fullmatch(function):
        return None
    if "/" in module:
        return (module, function) if _segments_ok(module, 2) else None
    if not SEGMENT.fullmatch(module):
        return None
    return (f"{namespace}/{module}" if namespace else module), function
