"""Hook modules as values: identity, static checks, references and call results.

Everything here is in-process and cheap: parsing a Starlark module never executes it.
Evaluating a module (its top level, its functions) only ever happens in a worker
subprocess, through `stateward.runtime.hooks.runner.HookRunner`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import starlark as sl

from stateward.domain.errors import UNRESOLVED_HOOK, Problem
from stateward.runtime.hooks import worker as hook_worker

# Stable failure codes of a hook call (HookResult.error_code).
HOOK_TIMEOUT = "HOOK_TIMEOUT"
HOOK_FAILED = "HOOK_FAILED"
HOOK_BAD_RESULT = "HOOK_BAD_RESULT"
HOOK_MEMORY = "HOOK_MEMORY"
HOOK_NOT_FOUND = "HOOK_NOT_FOUND"
# Refusals of the `workflow` module (issue 13): another instance than the hook's own or
# its children; a size or count limit; a call that cannot be made (self-advance, a
# finished instance, bad data).
HOOK_SCOPE = hook_worker.HOOK_SCOPE
HOOK_LIMIT = hook_worker.HOOK_LIMIT
HOOK_CALL = hook_worker.HOOK_CALL
# Validation code of a module that does not parse or has a bad name (check_module).
INVALID_MODULE = "INVALID_MODULE"

MAX_MODULE_BYTES = 256 * 1024
MODULE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
NAMESPACE = re.compile(r"[a-z0-9][a-z0-9_-]*(/[a-z0-9][a-z0-9_-]*)*")
FUNCTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_TOP_LEVEL_DEF = re.compile(r"^def[ \t]+([A-Za-z][A-Za-z0-9_]*)[ \t]*\(", re.M)
_LOCATION = re.compile(r"-->\s*\S+?:(\d+):(\d+)")


@dataclass(frozen=True)
class HookModule:
    """A deployed Starlark module; `hash` (sha256 hex of the source) is computed, never given."""

    namespace: str
    name: str
    source: str
    hash: str = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha256(self.source.encode("utf-8")).hexdigest()
        object.__setattr__(self, "hash", digest)


@dataclass(frozen=True)
class HookResult:
    """The outcome of one hook call: a JSON dict on success, else a stable code and reason."""

    ok: bool
    value: dict[str, Any] | None = None
    error_code: str | None = None
    error: str | None = None
    duration_ms: float = 0.0
    #: What the hook read and did through the `workflow` module (None: no call made):
    #: {reads: [{id, seq}], writes: [{id, data}], advances: [id]}.
    workflow: dict[str, Any] | None = None

    @classmethod
    def failure(cls, code: str, error: str, duration_ms: float) -> HookResult:
        """A failed call (the runtime puts the process in `error` with this reason)."""
        return cls(ok=False, error_code=code, error=error, duration_ms=duration_ms)


@dataclass(frozen=True)
class ModuleReport:
    """What loading a module in the sandbox found: problems, or its public functions."""

    problems: tuple[Problem, ...] = ()
    functions: frozenset[str] = frozenset()

    @property
    def ok(self) -> bool:
        """True when the module loaded without an error."""
        return not any(p.severity == "error" for p in self.problems)


@dataclass(frozen=True)
class HookRef:
    """A parsed `hook` field: `module:function` or `ns/path/module:function`."""

    namespace: str | None
    module: str
    function: str


def check_module(source: str, name: str) -> list[Problem]:
    """Static checks of a module before deployment: name shape, size, Starlark syntax.

    Only parses (with the sandbox dialect: no `load`, no f-strings); nothing is executed.
    Runtime errors of the top level (unknown names, `fail()`) are found by
    `HookRunner.inspect`, which evaluates the module in a worker.
    """
    problems: list[Problem] = []
    if not isinstance(name, str) or not MODULE_NAME.fullmatch(name):
        problems.append(
            Problem(INVALID_MODULE, f"module name {name!r} must match [a-z0-9][a-z0-9_-]*", "/name")
        )
    if not isinstance(source, str):
        problems.append(Problem(INVALID_MODULE, "module source must be a string", "/source"))
        return problems
    size = len(source.encode("utf-8"))
    if size > MAX_MODULE_BYTES:
        problems.append(
            Problem(INVALID_MODULE, f"module is {size} bytes (limit {MAX_MODULE_BYTES})", "/source")
        )
        return problems
    try:
        sl.parse(f"{name}.star", source, hook_worker.dialect())
    except sl.StarlarkError as e:
        message = hook_worker.summarize(e)
        where = _LOCATION.search(str(e))
        at = f"line {where.group(1)}, column {where.group(2)}: " if where else ""
        problems.append(Problem(INVALID_MODULE, f"{at}{message}", "/source"))
    return problems


def module_functions(source: str) -> frozenset[str]:
    """Public top-level `def` names of a module (static; `_private` names are not hooks).

    A cheap reading of the source for validators; `HookRunner.inspect` gives the exact
    list (including functions bound by assignment) by loading the module in a worker.
    """
    return frozenset(_TOP_LEVEL_DEF.findall(source))


def parse_hook_ref(ref: str) -> HookRef | Problem:
    """Split a state's `hook` into namespace (None = the workflow's own), module, function."""
    if not isinstance(ref, str) or ref.count(":") != 1:
        return Problem(UNRESOLVED_HOOK, f"hook {ref!r} must be 'module:function'", "")
    target, function = ref.split(":")
    namespace, _, module = target.rpartition("/")
    if not FUNCTION_NAME.fullmatch(function) or not MODULE_NAME.fullmatch(module):
        return Problem(UNRESOLVED_HOOK, f"hook {ref!r} is not 'module:function'", "")
    if namespace and not NAMESPACE.fullmatch(namespace):
        return Problem(UNRESOLVED_HOOK, f"hook {ref!r} has an invalid namespace", "")
    return HookRef(namespace or None, module, function)
