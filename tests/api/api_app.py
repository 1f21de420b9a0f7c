"""A tiny TEST-ONLY schema, fake services and app builder for the API infrastructure tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import strawberry
from starlette.applications import Starlette
from strawberry.types import Info

from stateward.app import create_app
from stateward.domain.errors import DomainError, Problem
from stateward.schema.base import JSON, build_schema
from stateward.settings import Settings


@dataclass(frozen=True)
class Viewer:
    """Who a test token stands for."""

    id: str


@strawberry.type
class Query:
    @strawberry.field
    def hello(self, name: str = "world") -> str:
        return f"hello {name}"

    @strawberry.field
    def whoami(self, info: Info) -> str | None:
        viewer = info.context.viewer
        return None if viewer is None else viewer.id

    @strawberry.field
    def refuse(self) -> str:
        raise DomainError(
            "INVALID_DEFINITION",
            "2 validation error(s)",
            problems=[
                Problem("MISSING_FIELD", "path is required", "/path"),
                Problem("UNKNOWN_STATE", "no such state", "/actions/0/to"),
            ],
        )

    @strawberry.field
    def boom(self) -> str:
        raise RuntimeError("secret database password in this message")

    @strawberry.field
    def maybe_missing(self) -> str | None:
        raise DomainError("NOT_FOUND", "no such thing")

    @strawberry.field
    def maybe_broken(self) -> str | None:
        raise RuntimeError("internal detail")

    @strawberry.field
    def nested(self) -> Nested:
        return Nested()


@strawberry.type
class Nested:
    @strawberry.field
    def nested(self) -> Nested:
        return Nested()

    @strawberry.field
    def leaf(self) -> int:
        return 1


@strawberry.type
class Mutation:
    @strawberry.mutation
    def echo(self, value: JSON) -> JSON:
        return value


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def ticks(self, count: int = 3) -> AsyncGenerator[int, None]:
        for i in range(count):
            yield i
            await asyncio.sleep(0)

    @strawberry.subscription
    async def forever(self) -> AsyncGenerator[int, None]:
        yield 0
        await asyncio.Event().wait()
        yield 1  # pragma: no cover

    @strawberry.subscription
    async def denied(self) -> AsyncGenerator[int, None]:
        raise DomainError("FORBIDDEN", "not for you")
        yield 0  # pragma: no cover

    @strawberry.subscription
    async def broken(self) -> AsyncGenerator[int, None]:
        yield 0
        raise RuntimeError("the stream's source failed: secret detail")

    @strawberry.subscription
    async def whoami(self, info: Info) -> AsyncGenerator[str, None]:
        viewer = info.context.viewer
        yield "anonymous" if viewer is None else viewer.id


@dataclass
class FakeServices:
    """Test double for the runtime services: token table, readiness switch, lifecycle log."""

    tokens: dict[str, Viewer] = field(default_factory=lambda: {"good-token": Viewer("alice")})
    is_ready: bool = True
    calls: list[str] = field(default_factory=list)

    async def authenticate(self, token: str) -> Viewer | None:
        return self.tokens.get(token)

    async def ready(self) -> bool:
        return self.is_ready

    async def start(self) -> None:
        self.calls.append("start")

    async def stop(self) -> None:
        self.calls.append("stop")


def make_app(services: Any = None, max_subscriptions: int = 20, **overrides: Any) -> Starlette:
    """An app over the test schema with `Settings` overrides."""
    settings = Settings(**overrides)
    schema = build_schema(Query, Mutation, Subscription, settings=settings)
    return create_app(
        settings,
        schema=schema,
        services=services if services is not None else FakeServices(),
        max_subscriptions=max_subscriptions,
    )
