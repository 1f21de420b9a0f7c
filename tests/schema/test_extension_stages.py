"""The extension runner's generator stages (`schema/extension_runner.py`): hooks are entered
in order and exited in reverse, an exception is thrown into each hook in turn, a hook may
swallow or replace it — what Strawberry's exit-stack context managers do — and a hook of
another shape keeps Strawberry's own path. Exercised through a real `build_schema` schema."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import strawberry
from strawberry.extensions import SchemaExtension

from stateward.schema.base import build_schema
from stateward.schema.extension_runner import CachedHooksRunner, _GeneratorStage
from stateward.settings import Settings

CALLS: list[str] = []


class First(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        CALLS.append("first enter")
        try:
            yield
        finally:
            CALLS.append("first exit")

    def on_execute(self) -> Iterator[None]:
        CALLS.append("first execute")
        yield
        CALLS.append("first executed")


class Second(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        CALLS.append("second enter")
        yield
        CALLS.append("second exit")
        result = self.execution_context.result
        CALLS.append(f"second saw errors={bool(result and result.errors)}")


class Plain(SchemaExtension):
    """A hook that is a plain function: Strawberry's own context managers run it."""

    def on_parse(self) -> None:  # type: ignore[override]
        CALLS.append("plain parse")


@strawberry.type
class Query:
    @strawberry.field
    def hello(self) -> str:
        return "world"

    @strawberry.field
    def broken(self) -> str:
        raise ValueError("boom")


def schema_with(*extensions: type[SchemaExtension]) -> strawberry.Schema:
    return build_schema(Query, settings=Settings(), extensions=list(extensions))


async def test_hooks_run_in_order_and_unwind_in_reverse() -> None:
    CALLS.clear()
    result = await schema_with(First, Second).execute("{ hello }")
    assert result.data == {"hello": "world"}
    assert CALLS == [
        "first enter",
        "second enter",
        "first execute",
        "first executed",
        "second exit",
        "second saw errors=False",
        "first exit",
    ]


async def test_resolver_errors_reach_the_end_of_the_operation() -> None:
    CALLS.clear()
    result = await schema_with(First, Second).execute("{ broken }")
    assert result.errors and result.errors[0].extensions["code"] == "INTERNAL_ERROR"
    assert "second saw errors=True" in CALLS and CALLS[-1] == "first exit"


async def test_a_plain_hook_keeps_strawberrys_path() -> None:
    CALLS.clear()
    result = await schema_with(First, Plain).execute("{ hello }")
    assert result.data == {"hello": "world"}
    assert "plain parse" in CALLS
    runner = CachedHooksRunner(execution_context=None, extensions=[First(), Plain()])  # type: ignore[arg-type]
    assert not isinstance(runner.parsing(), _GeneratorStage)
    assert isinstance(runner.operation(), _GeneratorStage)


def test_an_exception_is_thrown_into_each_hook_and_may_be_swallowed() -> None:
    seen: list[str] = []

    def outer(_: object) -> Iterator[None]:
        try:
            yield
        except KeyError:
            seen.append("outer swallowed")

    def inner(_: object) -> Iterator[None]:
        try:
            yield
        finally:
            seen.append("inner finally")

    with _GeneratorStage([(outer, None), (inner, None)]):  # type: ignore[list-item]
        raise KeyError("x")
    assert seen == ["inner finally", "outer swallowed"]


def test_a_hook_may_replace_the_exception() -> None:
    def translate(_: object) -> Iterator[None]:
        try:
            yield
        except KeyError as error:
            raise LookupError("translated") from error

    def witness(_: object) -> Iterator[None]:
        try:
            yield
        except LookupError:
            raise

    stage = _GeneratorStage([(witness, None), (translate, None)])  # type: ignore[list-item]
    with pytest.raises(LookupError, match="translated"), stage:
        raise KeyError("x")


def test_a_failing_entry_unwinds_the_hooks_already_entered() -> None:
    seen: list[str] = []

    def entered(_: object) -> Iterator[None]:
        try:
            yield
        finally:
            seen.append("unwound")

    def failing(_: object) -> Iterator[None]:
        raise OSError("no")
        yield  # pragma: no cover

    def not_yielding(_: object) -> Iterator[None]:
        return
        yield  # pragma: no cover

    with pytest.raises(OSError, match="no"):
        _GeneratorStage([(entered, None), (failing, None)]).__enter__()  # type: ignore[list-item]
    assert seen == ["unwound"]
    with pytest.raises(RuntimeError, match="didn't yield"):
        _GeneratorStage([(not_yielding, None)]).__enter__()  # type: ignore[list-item]


def test_a_hook_yielding_twice_is_an_error() -> None:
    def twice(_: object) -> Iterator[None]:
        yield
        yield

    stage = _GeneratorStage([(twice, None)])  # type: ignore[list-item]
    stage.__enter__()
    with pytest.raises(RuntimeError, match="didn't stop"):
        stage.__exit__(None, None, None)
