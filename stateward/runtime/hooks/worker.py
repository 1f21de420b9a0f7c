"""Sandboxed Starlark hook worker: one subprocess, JSON lines on stdin/stdout.

Run by `stateward.runtime.hooks.runner.HookRunner` as `python -I <this file> --memory-mb N`.
It imports only the standard library and `starlark`, never the `stateward` package, so it
starts fast and nothing of the server is reachable from it. The process caps its own address space
(RLIMIT_AS): a hook that allocates too much makes the Rust allocator abort this process
only; the runner sees the death and starts a new worker.

Protocol (one JSON object per line, one request in flight at a time):
  -> {"id", "op": "call", "hash", "name", "source"?, "function", "ctx", "timeout_ms", "world"?}
  -> {"id", "op": "inspect", "hash", "name", "source"?, "timeout_ms"}
  <- {"id", "ok": true, "value": {...}, "workflow"?: {...}} | {"id", "ok": true, "functions": [...]}
  <- {"id", "ok": false, "error_code", "error", "retire"?: true}
  <- {"id", "need_source": true}   (the module is not cached here; resend with "source")
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from collections import OrderedDict
from typing import Any, BinaryIO

import starlark as sl

# Stable failure codes; the same strings as in `stateward.runtime.hooks.module`.
HOOK_TIMEOUT = "HOOK_TIMEOUT"
HOOK_FAILED = "HOOK_FAILED"
HOOK_BAD_RESULT = "HOOK_BAD_RESULT"
HOOK_MEMORY = "HOOK_MEMORY"
HOOK_NOT_FOUND = "HOOK_NOT_FOUND"
INVALID_MODULE = "INVALID_MODULE"
#: What a memory fault teaches (issue 14): Starlark frees nothing until the hook returns, so
#: a loop that makes a value on every turn (floats, ints beyond 32 bits, strings, lists,
#: dicts) reaches the memory limit even when it looks merely CPU-bound.
MEMORY_HINT = (
    "Starlark frees values only when the hook returns, so a loop that creates floats, big"
    " ints, strings, lists or dicts on every turn grows until the limit: bound the loop or"
    " build less"
)

MAX_CACHED_MODULES = 128
MAX_CALLSTACK = 200
MAX_SAFE_INT = 2**53
PUBLIC_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_FRAME = re.compile(r"\*\s+(\S+?):(\d+), in (\S+)")
_MEMORY_PANIC = re.compile(r"memory|size|alloc|capacity", re.I)

# Runs inside Starlark, after the hook, under the same deadline: walks the result without
# recursion (Starlark has none) and rejects what JSON cannot carry. Done on the Starlark
# side because converting to Python silently turns NaN/inf into None.
# `_json_problem` is the one walk, shared by the result check and `set_stage_data`.
_JSON_CHECK = """
def _json_problem(value, subject):
    stack = [("", value)]
    for _ in range({max_nodes}):
        if not stack:
            return None
        path, v = stack.pop()
        t = type(v)
        if t == "dict":
            for k, x in v.items():
                if type(k) != "string":
                    return "non-string key " + repr(k) + " at '" + path + "/'"
                stack.append((path + "/" + k, x))
        elif t == "list" or t == "tuple":
            for i, x in enumerate(v):
                stack.append((path + "/" + str(i), x))
        elif t == "float":
            s = str(v)
            if "nan" in s or "inf" in s:
                return "non-finite number " + s + " at '" + path + "'"
        elif t not in ("string", "int", "bool", "NoneType"):
            return "value of type " + t + " at '" + path + "' is not JSON"
    return subject + " has more than {max_nodes} values (or contains itself)"
"""
_WRAPPER = """
load("hook", _fn = "{function}")
{json_check}
def _check(r):
    if type(r) != "dict":
        return "hook returned " + type(r) + ", expected dict"
    return _json_problem(r, "result")

def is_function():
    return type(_fn) == "function"

def run(ctx):
    r = _fn(ctx)
    problem = _check(r)
    return [problem, r if problem == None else None]
"""
MAX_RESULT_NODES = 200_000


def _json_check() -> str:
    """The Starlark text of `_json_problem`, bounded by MAX_RESULT_NODES."""
    return _JSON_CHECK.format(max_nodes=MAX_RESULT_NODES)


class HookFault(Exception):
    """A failure of the hook (not of the worker), reported to the runner with a stable code."""

    def __init__(self, code: str, message: str, retire: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retire = retire


# The `workflow` module (seed §10; issue 13). A hook reads and writes its own instance
# and that instance's children through `workflow.*`, never anything else. The worker has
# no way back to the server: the runtime sends the hook's whole reachable world with the
# call ("world": the instance, its children, their open assignments, each pinned by its
# seq), the functions answer from it, and the writes are returned beside the result as a
# record ("workflow": reads with the seq read, merged data per instance, advances) that
# the runtime stores in the `$automate` event and turns into kernel events. So a hook is
# as deterministic as before, and replay needs neither Starlark nor the reads.
HOOK_SCOPE = "HOOK_SCOPE"
HOOK_LIMIT = "HOOK_LIMIT"
HOOK_CALL = "HOOK_CALL"
#: Bytes (JSON) of one `set_stage_data` and of all of one run's writes.
MAX_WRITE_BYTES = 64 * 1024
MAX_WRITES_BYTES = 256 * 1024
#: Children one run may advance (each at most once: a loop of `advance` is refused).
MAX_ADVANCES = 20
#: `workflow.*` calls per run (reads are cheap, but a loop of them still is a loop).
MAX_WORKFLOW_CALLS = 10_000
LIVE = ("active", "stale")
_PRELUDE = """
{json_check}
def _check_value(v):
    if type(v) != "dict":
        return "data must be a dict, not " + type(v)
    return _json_problem(v, "data")

def _set_stage_data(instance_id, data):
    return _workflow_set_stage_data(instance_id, data, _check_value(data))

workflow = struct(
    get_instance = _workflow_get_instance,
    get_stage_data = _workflow_get_stage_data,
    set_stage_data = _set_stage_data,
    advance = _workflow_advance,
    get_assignments = _workflow_get_assignments,
)
"""


class WorkflowModule:
    """The `workflow.*` functions of one call, answered from the call's world.

    A refusal sets `fault` (its stable code) and raises: Starlark has no `try`, so the
    hook fails, and the runner reports the fault's code, not a generic HOOK_FAILED.
    """

    def __init__(self) -> None:
        self.reset(None)

    def reset(self, world: dict[str, Any] | None) -> None:
        """Start a call with `world` (None: no call in progress, e.g. loading a module)."""
        self.world = world
        self.instances: dict[str, dict[str, Any]] = dict((world or {}).get("instances") or {})
        self.reads: dict[str, int] = {}
        self.writes: dict[str, dict[str, Any]] = {}
        self.advances: list[str] = []
        self.written = 0
        self.calls = 0
        self.fault: HookFault | None = None

    def bind(self, module: sl.Module) -> None:
        """Bind the functions into a hook module (before its source is evaluated)."""
        module.add_callable("_workflow_get_instance", self.get_instance)
        module.add_callable("_workflow_get_stage_data", self.get_stage_data)
        module.add_callable("_workflow_set_stage_data", self.set_stage_data)
        module.add_callable("_workflow_advance", self.advance)
        module.add_callable("_workflow_get_assignments", self.get_assignments)

    def _refuse(self, code: str, message: str) -> Exception:
        self.fault = HookFault(code, message)
        return ValueError(f"{code}: {message}")

    def _target(self, op: str, instance_id: Any) -> dict[str, Any]:
        """The instance `op` names; HOOK_SCOPE for anything but the hook's own instance
        and its children (the same answer whether or not such an id exists elsewhere)."""
        self.calls += 1
        if self.calls > MAX_WORKFLOW_CALLS:
            raise self._refuse(HOOK_LIMIT, f"more than {MAX_WORKFLOW_CALLS} workflow calls")
        if self.world is None:
            raise self._refuse(HOOK_CALL, f"workflow.{op} is only available inside a hook call")
        inst = self.instances.get(instance_id) if isinstance(instance_id, str) else None
        shown = (
            repr(instance_id) if len(repr(instance_id)) <= 80 else repr(instance_id)[:77] + "..."
        )
        if inst is None and instance_id in (self.world.get("omitted") or ()):
            raise self._refuse(
                HOOK_LIMIT,
                f"workflow.{op}({shown}): a child beyond the first 200 (or 8 MiB of "
                "children's data) a hook can see",
            )
        if inst is None:
            raise self._refuse(
                HOOK_SCOPE,
                f"workflow.{op}({shown}): a hook may only use its own instance and "
                "that instance's children",
            )
        self.reads.setdefault(instance_id, inst["seq"])
        return inst

    def get_instance(self, instance_id: Any) -> dict[str, Any]:
        """`workflow.get_instance(id)`: id, workflow, version, state, status, seq, data,
        metadata, parent_id, and for the hook's own instance `children` (ids)."""
        return self._target("get_instance", instance_id)

    def get_stage_data(self, instance_id: Any) -> dict[str, Any]:
        """`workflow.get_stage_data(id)`: the instance's data (with this run's writes)."""
        return self._target("get_stage_data", instance_id)["data"]  # type: ignore[no-any-return]

    def get_assignments(self, instance_id: Any) -> list[Any]:
        """`workflow.get_assignments(id)`: the instance's open assignments, oldest first."""
        self._target("get_assignments", instance_id)
        return list(((self.world or {}).get("assignments") or {}).get(instance_id, []))

    def set_stage_data(self, instance_id: Any, data: Any, problem: Any = None) -> None:
        """`workflow.set_stage_data(id, data)`: merge `data` (shallow, like a result)."""
        inst = self._target("set_stage_data", instance_id)
        if problem is not None:
            raise self._refuse(HOOK_CALL, f"workflow.set_stage_data: {problem}")
        bad = sorted(k for k in data if k.startswith("$") or k == "state")
        if bad:
            raise self._refuse(HOOK_CALL, f"workflow.set_stage_data: reserved key {bad[0]!r}")
        if inst["status"] not in LIVE:
            raise self._refuse(
                HOOK_CALL, f"workflow.set_stage_data: {instance_id} is {inst['status']}"
            )
        try:
            check_json(data)
        except HookFault as fault:
            raise self._refuse(HOOK_CALL, f"workflow.set_stage_data: {fault.message}") from None
        size = len(json.dumps(data, ensure_ascii=False).encode())
        if size > MAX_WRITE_BYTES:
            raise self._refuse(
                HOOK_LIMIT, f"workflow.set_stage_data: {size} bytes (limit {MAX_WRITE_BYTES})"
            )
        self.written += size
        if self.written > MAX_WRITES_BYTES:
            raise self._refuse(
                HOOK_LIMIT, f"workflow.set_stage_data: {self.written} bytes written in one run "
                f"(limit {MAX_WRITES_BYTES})",
            )  # fmt: skip
        inst["data"] = {**inst["data"], **data}
        self.writes.setdefault(instance_id, {}).update(data)

    def advance(self, instance_id: Any) -> None:
        """`workflow.advance(id)`: advance a child once the hook's event is recorded."""
        inst = self._target("advance", instance_id)
        if self.world is not None and instance_id == self.world.get("self"):
            raise self._refuse(
                HOOK_CALL, "workflow.advance: a hook routes its own instance by its result "
                "($action, $next), not by advance",
            )  # fmt: skip
        if inst["status"] not in LIVE:
            raise self._refuse(HOOK_CALL, f"workflow.advance: {instance_id} is {inst['status']}")
        if instance_id in self.advances:
            raise self._refuse(
                HOOK_LIMIT, f"workflow.advance: {instance_id} advanced twice in one run "
                "(cycle guard)",
            )  # fmt: skip
        if len(self.advances) >= MAX_ADVANCES:
            raise self._refuse(HOOK_LIMIT, f"workflow.advance: more than {MAX_ADVANCES} advances")
        self.advances.append(instance_id)

    def record(self) -> dict[str, Any] | None:
        """What this run read and did (None when it made no `workflow.*` call)."""
        if not self.reads:
            return None
        return {
            "reads": [{"id": i, "seq": seq} for i, seq in self.reads.items()],
            "writes": [{"id": i, "data": d} for i, d in self.writes.items()],
            "advances": list(self.advances),
        }


def _hook_frame(traceback: str) -> str:
    """' (at m.star:8, in fn)': the innermost frame of the hook's own code."""
    frames = [
        f for f in _FRAME.finditer(traceback) if f.group(1) not in ("workflow.star", "wrapper.star")
    ]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {f.group(1)}:{f.group(2)}, in {f.group(3)})"


def dialect() -> sl.Dialect:
    """Standard Starlark without `load` (hooks cannot reach other files)."""
    d = sl.Dialect.standard()
    d.enable_load = False
    return d


def summarize(error: BaseException) -> str:
    """The `error:` line of a Starlark traceback plus its location, without the code excerpt."""
    text = str(error)
    lines = text.splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
    if not errors:
        return " ".join(text.split())[:500] or type(error).__name__
    i = errors[-1]
    where = next(
        (ln.strip()[4:] for ln in lines[i + 1 : i + 3] if ln.strip().startswith("-->")), ""
    )
    message = lines[i][len("error:") :].strip()
    return f"{message} ({where})" if where else message


class Sandbox:
    """Compiles modules once (cached by hash) and calls their functions under a deadline."""

    def __init__(self) -> None:
        self.globals = sl.Globals.standard()
        self.workflow = WorkflowModule()
        self.prelude = sl.parse(
            "workflow.star", _PRELUDE.format(json_check=_json_check()), dialect()
        )
        self.prelude_globals = sl.Globals.extended_by([sl.LibraryExtension.StructType])
        self.dialect = dialect()
        self.modules: OrderedDict[str, tuple[sl.FrozenModule, dict[str, sl.FrozenModule]]] = (
            OrderedDict()
        )
        self.deadline = 0.0
        self.cancelled = False
        self.options = sl.EvalOptions(
            check_cancelled=self._check_cancelled, max_callstack_size=MAX_CALLSTACK
        )

    def _check_cancelled(self) -> bool:
        if time.monotonic() > self.deadline:
            self.cancelled = True
        return self.cancelled

    def _guard(self, action: str, fn: Any) -> Any:
        try:
            return fn()
        except sl.StarlarkError as e:
            if self.workflow.fault is not None:  # a refused `workflow.*` call: its own code
                fault = self.workflow.fault
                raise HookFault(fault.code, fault.message + _hook_frame(str(e))) from None
            if self.cancelled:
                raise HookFault(HOOK_TIMEOUT, f"{action} exceeded its time limit") from None
            raise HookFault(HOOK_FAILED, f"{action} failed: {summarize(e)}") from None
        except MemoryError:
            raise HookFault(
                HOOK_MEMORY, f"{action} ran out of memory; {MEMORY_HINT}", retire=True
            ) from None
        except BaseException as e:  # pyo3 PanicException derives from BaseException
            if isinstance(e, KeyboardInterrupt | SystemExit):
                raise
            text = str(e)
            code = (
                HOOK_MEMORY if re.search(r"memory|size|alloc|capacity", text, re.I) else HOOK_FAILED
            )
            hint = f"; {MEMORY_HINT}" if code == HOOK_MEMORY else ""
            raise HookFault(
                code, f"{action} crashed the interpreter: {text}{hint}", retire=True
            ) from None

    def module(self, req: dict[str, Any]) -> sl.FrozenModule | None:
        """The frozen module for the request's hash, compiling `source` when given."""
        digest = req["hash"]
        if digest in self.modules:
            self.modules.move_to_end(digest)
            return self.modules[digest][0]
        source = req.get("source")
        if source is None:
            return None
        filename = f"{req.get('name') or 'hook'}.star"
        try:
            ast = sl.parse(filename, source, self.dialect)
        except sl.StarlarkError as e:
            raise HookFault(INVALID_MODULE, f"module does not parse: {summarize(e)}") from None
        mod = sl.Module()
        self.workflow.bind(mod)
        sl.eval(mod, self.prelude, self.prelude_globals)
        self.workflow.reset(None)  # the top level runs once per cache: no world, no calls
        self._guard(
            "loading the module", lambda: sl.eval_with(self.options, mod, ast, self.globals)
        )
        frozen = mod.freeze()
        self.modules[digest] = (frozen, {})
        while len(self.modules) > MAX_CACHED_MODULES:
            self.modules.popitem(last=False)
        return frozen

    def wrapper(self, digest: str, function: str) -> sl.FrozenModule:
        """A small module that loads `function` from the hook and checks its result."""
        frozen, wrappers = self.modules[digest]
        if function in wrappers:
            return wrappers[function]
        if not PUBLIC_NAME.fullmatch(function):
            raise HookFault(HOOK_NOT_FOUND, f"no public function {function!r} in the module")
        src = _WRAPPER.format(function=function, json_check=_json_check())
        mod = sl.Module()
        try:
            sl.eval(mod, sl.parse("wrapper.star", src, sl.Dialect.standard()), self.globals,
                    sl.FileLoader(lambda _name: frozen))  # fmt: skip
        except sl.StarlarkError:
            raise HookFault(HOOK_NOT_FOUND, f"no function {function!r} in the module") from None
        w = mod.freeze()
        if not w.call("is_function"):
            raise HookFault(HOOK_NOT_FOUND, f"{function!r} is not a function")
        wrappers[function] = w
        return w

    def start(self, timeout_ms: int) -> None:
        """Arm the deadline for one request (module loading and the call share it)."""
        self.cancelled = False
        self.deadline = time.monotonic() + max(1, int(timeout_ms)) / 1000.0

    def call(self, req: dict[str, Any], max_result_bytes: int) -> dict[str, Any] | None:
        """Run one hook call; None means the module must be sent with its source."""
        self.start(req.get("timeout_ms", 1000))
        if self.module(req) is None:
            return None
        w = self.wrapper(req["hash"], req["function"])
        self.workflow.reset(req.get("world"))
        problem, value = self._guard(
            "the hook", lambda: w.call_with(self.options, "run", req["ctx"]).value
        )
        if problem is not None:
            raise HookFault(HOOK_BAD_RESULT, problem)
        check_json(value)
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode())
        if size > max_result_bytes:
            raise HookFault(HOOK_BAD_RESULT, f"result is {size} bytes (limit {max_result_bytes})")
        return value  # type: ignore[no-any-return]

    def inspect(self, req: dict[str, Any]) -> list[str] | None:
        """Load the module and list its public top-level functions (None: source needed)."""
        self.start(req.get("timeout_ms", 1000))
        if self.module(req) is None:
            return None
        frozen = self.modules[req["hash"]][0]
        names = sorted(set(PUBLIC_NAME.findall(req.get("source") or "")))
        found: list[str] = []
        for name in names:
            src = f'load("hook", _x = "{name}")\ndef t():\n    return type(_x)\n'
            try:
                m = sl.Module()
                sl.eval(m, sl.parse("probe.star", src, sl.Dialect.standard()), self.globals,
                        sl.FileLoader(lambda _n: frozen))  # fmt: skip
                if m.freeze().call("t") == "function":
                    found.append(name)
            except sl.StarlarkError:
                continue
        return found


def check_json(value: Any) -> None:
    """Reject integers JSON peers cannot represent exactly (beyond ±2^53)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_SAFE_INT:
            raise HookFault(HOOK_BAD_RESULT, f"integer {v} is beyond ±2^53")


def serve(inp: BinaryIO, out: BinaryIO, max_result_bytes: int) -> None:
    """Answer requests until stdin closes; retire (exit) after an interpreter crash."""
    sandbox = Sandbox()
    for line in inp:
        req = json.loads(line)
        reply: dict[str, Any] = {"id": req.get("id")}
        retire = False
        try:
            if req.get("op") == "inspect":
                functions = sandbox.inspect(req)
                result: Any = functions
                reply.update(ok=True, functions=functions)
            else:
                result = sandbox.call(req, max_result_bytes)
                reply.update(ok=True, value=result)
                record = sandbox.workflow.record() if result is not None else None
                if record is not None:
                    reply["workflow"] = record
            if result is None:
                reply = {"id": req.get("id"), "need_source": True}
        except HookFault as f:
            retire = f.retire
            reply.update(ok=False, error_code=f.code, error=f.message, retire=retire)
        out.write(json.dumps(reply, ensure_ascii=False, allow_nan=False).encode() + b"\n")
        out.flush()
        if retire:
            return


def limit_resources(memory_mb: int) -> None:
    """Cap the address space, forbid writing files and core dumps."""
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list[str]) -> int:
    """Entry point: `hook_worker.py [--memory-mb N] [--max-result-bytes N]`."""
    args = dict(zip(argv[::2], argv[1::2], strict=False))
    memory_mb = int(args.get("--memory-mb", "512"))
    max_result_bytes = int(args.get("--max-result-bytes", str(1024 * 1024)))
    # The protocol owns the real stdout; anything else printing lands on stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    if memory_mb > 0:
        limit_resources(memory_mb)
    serve(sys.stdin.buffer, out, max_result_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
