"""A cheaper Strawberry extension runner: each hook's context manager is built per class.

Strawberry 0.341 rebuilds, for every operation and every hook stage (operation, parse,
validate, execute), a context manager per extension: `inspect.isgeneratorfunction`, a
bound method and `contextlib.contextmanager` with its `functools.wraps` copy — a fifth
of the CPU of a small query here (issue 18, "extension plumbing") — and again for every
subscription event of every subscriber (`on_stream_result`). The same context
managers are built here once per (extension class, hook) and only bound to the operation's
extension instance with `functools.partial`; behaviour (order, exceptions, async hooks) is
Strawberry's own, since its context-manager classes still run them. Hooks of other shapes
(plain or async functions) go through Strawberry's path unchanged.

When every hook of a stage is a generator function (stateward's own extensions: the
request policy and telemetry), the stage is `_GeneratorStage` instead: it drives the
generators itself, as `contextlib.contextmanager` inside an `ExitStack` would (entered
in order, exited in reverse, an exception thrown into each in turn, swallowed when a hook
swallows it, replaced when a hook raises another), without an exit stack, a
`_GeneratorContextManager` per hook or a `functools.partial` per hook per operation (four
stages × two hooks on every operation, issue 18 `req18`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable
from typing import Any

from strawberry.extensions import SchemaExtension
from strawberry.extensions.context import (
    ExecutingContextManager,
    ExtensionContextManagerBase,
    OperationContextManager,
    ParsingContextManager,
    StreamResultContextManager,
    ValidationContextManager,
    WrappedHook,
)
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.types import StreamExecutionResult

_FALLBACK = object()
#: (extension class, hook name) -> (context-manager factory, is_async), None (no hook), or
#: _FALLBACK (a hook shape Strawberry wraps itself).
_HOOKS: dict[tuple[type, str], Any] = {}


def _hook_of(cls: type, name: str) -> Any:
    key = (cls, name)
    found = _HOOKS.get(key, _HOOKS)
    if found is not _HOOKS:
        return found
    fn = getattr(cls, name)
    if fn is getattr(SchemaExtension, name):
        found = None
    elif inspect.isgeneratorfunction(fn):
        found = (contextlib.contextmanager(fn), False)
    elif inspect.isasyncgenfunction(fn):
        found = (contextlib.asynccontextmanager(fn), True)
    else:
        found = _FALLBACK
    _HOOKS[key] = found
    return found


class _CachedHooks(ExtensionContextManagerBase):
    """`get_hook` from the per-class cache (see the module docstring)."""

    def get_hook(self, extension: SchemaExtension) -> WrappedHook | None:
        found = _hook_of(type(extension), self.HOOK_NAME)
        if found is None:
            return None
        if found is _FALLBACK:
            return super().get_hook(extension)
        factory: Callable[..., Any] = found[0]
        return WrappedHook(
            extension=extension, hook=functools.partial(factory, extension), is_async=found[1]
        )


def _generator_hooks(
    extensions: list[SchemaExtension], name: str
) -> list[tuple[Callable[..., Any], SchemaExtension]] | None:
    """The (hook function, extension) pairs of stage `name` when every one of them is a
    generator function; None when a hook has another shape (Strawberry's path)."""
    hooks: list[tuple[Callable[..., Any], SchemaExtension]] = []
    for extension in extensions:
        found = _hook_of(type(extension), name)
        if found is None:
            continue
        if found is _FALLBACK or found[1]:
            return None
        hooks.append((getattr(type(extension), name), extension))
    return hooks


class _GeneratorStage:
    """One stage's generator hooks, driven directly (see the module docstring); usable
    with `with` and `async with` like Strawberry's context managers."""

    __slots__ = ("_hooks", "_running")

    def __init__(self, hooks: list[tuple[Callable[..., Any], SchemaExtension]]) -> None:
        self._hooks = hooks
        self._running: list[Any] = []

    def __enter__(self) -> None:
        running = self._running
        for hook, extension in self._hooks:
            generator = hook(extension)
            try:
                next(generator)
            except StopIteration:
                error = RuntimeError("generator didn't yield")
                self._unwind(RuntimeError, error, None)  # the hooks entered so far
                raise error from None
            except BaseException as error:
                self._unwind(type(error), error, error.__traceback__)
                raise
            running.append(generator)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        return self._unwind(exc_type, exc, tb)

    async def __aenter__(self) -> None:
        self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        return self._unwind(exc_type, exc, tb)

    def _unwind(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        """Exit the running hooks in reverse; True when the exception was swallowed
        (ExitStack's answer); a hook's own new exception is raised."""
        running, self._running = self._running, []
        pending = exc
        for generator in reversed(running):
            if pending is None:
                try:
                    next(generator)
                except StopIteration:
                    continue
                except BaseException as error:
                    pending = error
                    continue
                pending = RuntimeError("generator didn't stop")
                continue
            try:
                generator.throw(pending)
            except StopIteration:
                pending = None  # the hook swallowed it
            except BaseException as error:
                if error is not pending:
                    if error.__context__ is None:
                        error.__context__ = pending
                    pending = error
            else:
                pending = RuntimeError("generator didn't stop after throw()")
        if pending is None:
            return exc is not None
        if pending is exc:
            return False
        raise pending


class _Operation(_CachedHooks, OperationContextManager):
    pass


class _Validation(_CachedHooks, ValidationContextManager):
    pass


class _Parsing(_CachedHooks, ParsingContextManager):
    pass


class _Executing(_CachedHooks, ExecutingContextManager):
    pass


class _StreamResult(_CachedHooks, StreamResultContextManager):
    """Per subscription event and subscriber: the hook is called with the result."""


class CachedHooksRunner(SchemaExtensionsRunner):
    """Strawberry's runner with the per-class hook cache for every stage, including the
    per-event `on_stream_result` of subscriptions (once per event per subscriber)."""

    def _stage(self, name: str, fallback: type[ExtensionContextManagerBase]) -> Any:
        hooks = _generator_hooks(self.extensions, name)
        return fallback(self.extensions) if hooks is None else _GeneratorStage(hooks)

    def operation(self) -> OperationContextManager:
        """Hooks around the whole operation."""
        stage: OperationContextManager = self._stage("on_operation", _Operation)
        return stage

    def validation(self) -> ValidationContextManager:
        """Hooks around validation."""
        stage: ValidationContextManager = self._stage("on_validate", _Validation)
        return stage

    def parsing(self) -> ParsingContextManager:
        """Hooks around parsing."""
        stage: ParsingContextManager = self._stage("on_parse", _Parsing)
        return stage

    def executing(self) -> ExecutingContextManager:
        """Hooks around execution."""
        stage: ExecutingContextManager = self._stage("on_execute", _Executing)
        return stage

    def on_stream_result(self, result: StreamExecutionResult) -> StreamResultContextManager:
        """Hooks around one streamed result (a subscription event)."""
        return _StreamResult(self.extensions, result)
