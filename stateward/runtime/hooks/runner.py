"""Sandboxed Starlark hooks: a pool of worker subprocesses behind an async API.

`HookRunner.run(module, function, ctx, timeout_ms)` calls `def function(ctx)` of a deployed
module and returns a `HookResult`; it never raises for a fault of the hook. Each worker is a
long-lived `python -I hook_worker.py` with an address-space limit, speaking JSON lines; it
caches compiled modules by hash and enforces the deadline with Starlark's cooperative
cancellation. The runner adds a hard wall-clock kill (timeout + grace) and replaces a worker
that died (memory limit) or was killed. This module imports nothing of the project beyond
`stateward.domain.errors`, `stateward.settings` and its sibling hook modules.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from types import TracebackType
from typing import Any

from stateward.domain.errors import Problem
from stateward.observe import metrics, tracing
from stateward.runtime.hooks import worker as hook_worker
from stateward.runtime.hooks.module import (
    HOOK_BAD_RESULT,
    HOOK_FAILED,
    HOOK_MEMORY,
    HOOK_NOT_FOUND,
    HOOK_TIMEOUT,
    INVALID_MODULE,
    HookModule,
    HookRef,
    HookResult,
    ModuleReport,
    check_module,
    module_functions,
    parse_hook_ref,
)
from stateward.runtime.hooks.process import WorkerDied, WorkerProcess
from stateward.settings import Settings

__all__ = [
    "HookModule",
    "HookRef",
    "HookResult",
    "HookRunner",
    "ModuleReport",
    "check_module",
    "module_functions",
    "parse_hook_ref",
]


class HookRunner:
    """A small pool of sandbox workers; requests queue for a free worker.

    Use as `async with HookRunner() as runner:` (or call `close()`); workers start lazily.
    """

    def __init__(
        self,
        *,
        workers: int = 2,
        memory_limit_mb: int = 512,
        default_timeout_ms: int = 1000,
        grace_ms: int = 1000,
        max_result_bytes: int = 1024 * 1024,
    ) -> None:
        if workers < 1:
            raise ValueError("a HookRunner needs at least one worker")
        self.memory_limit_mb = memory_limit_mb
        self.default_timeout_ms = default_timeout_ms
        self.grace_ms = grace_ms
        self.max_result_bytes = max_result_bytes
        self._size = workers
        self._idle: asyncio.Queue[list[WorkerProcess | None]] | None = None
        self._slots: list[list[WorkerProcess | None]] = []
        self._closed = False

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> HookRunner:
        """A runner using `settings.hook_timeout_ms` as the default time limit."""
        return cls(default_timeout_ms=settings.hook_timeout_ms, **overrides)

    async def __aenter__(self) -> HookRunner:
        return self

    async def start(self) -> None:
        """Spawn every worker now (optional: workers otherwise start on first use)."""
        self._pool()
        for slot in self._slots:
            if slot[0] is None or not slot[0].alive:
                slot[0] = await WorkerProcess.start(self._spawn_args(), self._line_limit())

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _pool(self) -> asyncio.Queue[list[WorkerProcess | None]]:
        if self._closed:
            raise RuntimeError("HookRunner is closed")
        if self._idle is None:
            self._idle = asyncio.Queue()
            for _ in range(self._size):
                slot: list[WorkerProcess | None] = [None]
                self._slots.append(slot)
                self._idle.put_nowait(slot)
        return self._idle

    def _spawn_args(self) -> list[str]:
        return [
            sys.executable,
            "-I",
            hook_worker.__file__,
            "--memory-mb",
            str(self.memory_limit_mb),
            "--max-result-bytes",
            str(self.max_result_bytes),
        ]

    async def run(
        self,
        module: HookModule,
        function: str,
        ctx: dict[str, Any],
        timeout_ms: int | None = None,
        world: dict[str, Any] | None = None,
    ) -> HookResult:
        """Call `function(ctx)` of `module`; ctx = {instance_id, workflow, state, data, input}.

        `world` (`hooks.world.build`) is what the `workflow` module may read: the hook's
        instance and its children; without it every `workflow.*` call is refused.
        Returns ok with a JSON dict (and `workflow`, the record of the module's calls), or
        a failure coded HOOK_TIMEOUT, HOOK_FAILED, HOOK_BAD_RESULT, HOOK_MEMORY,
        HOOK_NOT_FOUND, or HOOK_SCOPE / HOOK_LIMIT / HOOK_CALL (a refused `workflow.*`
        call). Raises only for caller bugs (ctx that is not JSON, a closed runner).
        """
        limit = self.default_timeout_ms if timeout_ms is None else timeout_ms
        json.dumps(ctx, allow_nan=False)  # a ctx that is not JSON is the caller's bug
        req = {"op": "call", "function": function, "ctx": ctx, "timeout_ms": limit}
        if world is not None:
            req["world"] = world
        started = time.perf_counter()
        with tracing.span("hook.run", attributes={"stateward.hook": f"{module.name}:{function}"}):
            reply = await self._request(module, req, limit)
        elapsed = (time.perf_counter() - started) * 1000.0
        metrics.record_hook("ok" if reply.get("ok") else str(reply["error_code"]), elapsed / 1e3)
        if reply.get("ok"):
            return HookResult(
                ok=True, value=reply["value"], duration_ms=elapsed, workflow=reply.get("workflow")
            )
        return HookResult.failure(reply["error_code"], reply["error"], elapsed)

    async def inspect(self, module: HookModule, timeout_ms: int | None = None) -> ModuleReport:
        """Load a module in a worker: its problems (syntax, top-level errors) or its functions."""
        problems = check_module(module.source, module.name)
        if problems:
            return ModuleReport(problems=tuple(problems))
        limit = self.default_timeout_ms if timeout_ms is None else timeout_ms
        reply = await self._request(module, {"op": "inspect", "timeout_ms": limit}, limit)
        if reply.get("ok"):
            return ModuleReport(functions=frozenset(reply["functions"]))
        return ModuleReport(problems=(Problem(INVALID_MODULE, reply["error"], "/source"),))

    async def _request(
        self, module: HookModule, req: dict[str, Any], limit_ms: int
    ) -> dict[str, Any]:
        idle = self._pool()
        slot = await idle.get()
        try:
            worker = slot[0]
            if worker is None or not worker.alive:
                worker = slot[0] = await WorkerProcess.start(self._spawn_args(), self._line_limit())
            hard = (limit_ms + self.grace_ms) / 1000.0
            try:
                return await self._exchange(worker, module, req, hard)
            except TimeoutError:
                await worker.kill()
                return _fault(HOOK_TIMEOUT, f"hook did not answer within {limit_ms} ms; killed")
            except WorkerDied as died:
                memory = died.memory
                return _fault(
                    HOOK_MEMORY if memory else HOOK_FAILED,
                    f"hook worker died ({died.reason})"
                    + (f"; memory limit reached: {hook_worker.MEMORY_HINT}" if memory else ""),
                )
            except BaseException:
                await worker.kill()  # cancelled mid-request: the worker's state is unknown
                raise
        finally:
            idle.put_nowait(slot)

    async def _exchange(
        self, worker: WorkerProcess, module: HookModule, req: dict[str, Any], hard: float
    ) -> dict[str, Any]:
        base = {**req, "hash": module.hash, "name": module.name}
        known = module.hash in worker.known
        reply = await worker.request(base if known else {**base, "source": module.source}, hard)
        if reply.get("need_source"):
            reply = await worker.request({**base, "source": module.source}, hard)
        if reply.get("ok") or reply.get("error_code") in (HOOK_BAD_RESULT, HOOK_NOT_FOUND):
            worker.known.add(module.hash)  # compiled and cached over there
        if reply.get("retire"):
            await worker.kill()
        if reply.get("error_code") == INVALID_MODULE and req["op"] == "call":
            reply = {**reply, "error_code": HOOK_FAILED}
        return reply

    def _line_limit(self) -> int:
        return 2 * self.max_result_bytes + 64 * 1024

    async def close(self) -> None:
        """Stop every worker (idempotent)."""
        self._closed = True
        for slot in self._slots:
            worker = slot[0]
            if worker is not None:
                await worker.stop()
            slot[0] = None


def _fault(code: str, error: str) -> dict[str, Any]:
    return {"ok": False, "error_code": code, "error": error}
