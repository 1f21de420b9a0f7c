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

    def operation(self) -> OperationContextManager:
        """Hooks around the whole operation."""
        return _Operation(self.extensions)

    def validation(self) -> ValidationContextManager:
        """Hooks around validation."""
        return _Validation(self.extensions)

    def parsing(self) -> ParsingContextManager:
        """Hooks around parsing."""
        return _Parsing(self.extensions)

    def executing(self) -> ExecutingContextManager:
        """Hooks around execution."""
        return _Executing(self.extensions)

    def on_stream_result(self, result: StreamExecutionResult) -> StreamResultContextManager:
        """Hooks around one streamed result (a subscription event)."""
        return _StreamResult(self.extensions, result)
