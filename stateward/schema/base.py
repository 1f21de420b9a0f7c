"""Schema construction: one helper that turns root types into a hardened `strawberry.Schema`.

Every schema the app serves goes through `build_schema`, so the request limits, caches,
introspection policy and error policy are the same everywhere (tests included).
Extensions are passed as factories (Strawberry builds fresh instances per operation), never
as shared instances.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import strawberry
from graphql import ASTValidationRule, GraphQLError
from strawberry.extensions import (
    AddValidationRules,
    DisableIntrospection,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    ParserCache,
    QueryDepthLimiter,
    SchemaExtension,
    ValidationCache,
)
from strawberry.scalars import JSON
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext

from stateward.schema.errors import ErrorPolicy, domain_error_of
from stateward.settings import Settings

__all__ = ["JSON", "Limits", "StatewardSchema", "build_schema", "limits_from_settings"]


@dataclass(frozen=True)
class Limits:
    """Per-document limits, on by default (DESIGN §10). Override through `settings.extra`."""

    max_depth: int = 12
    max_aliases: int = 30
    max_tokens: int = 5000
    cache_size: int = 1024


def limits_from_settings(settings: Settings) -> Limits:
    """Limits read from `settings.extra` keys `graphql_max_depth|aliases|tokens`, else defaults."""
    extra = settings.extra or {}
    base = Limits()
    return Limits(
        max_depth=int(extra.get("graphql_max_depth", base.max_depth)),
        max_aliases=int(extra.get("graphql_max_aliases", base.max_aliases)),
        max_tokens=int(extra.get("graphql_max_tokens", base.max_tokens)),
        cache_size=int(extra.get("graphql_cache_size", base.cache_size)),
    )


class SafeParserCache(ParserCache):
    """`ParserCache` that lets Strawberry itself report syntax errors.

    Strawberry 0.341's `ParserCache` raises syntax errors from inside its `on_parse` hook,
    which skips every extension's end-of-operation step (so `MaskErrors` and our error
    codes never see the error). On a failed parse this leaves the document unset;
    Strawberry then parses again on its normal path and reports the error properly.
    """

    def on_parse(self) -> Iterator[None]:
        """Parse through the shared LRU cache; on a syntax error, defer to Strawberry."""
        ctx = self.execution_context
        try:
            ctx.graphql_document = self.cached_parse_document(ctx.query, **ctx.parse_options)
        except GraphQLError:
            ctx.graphql_document = None
        yield


class StatewardSchema(strawberry.Schema):
    """A `strawberry.Schema` that logs only unexpected errors (domain refusals are data)."""

    def process_errors(
        self,
        errors: list[GraphQLError],
        execution_context: ExecutionContext | None = None,
    ) -> None:
        """Log errors that are bugs; skip domain errors and client document errors."""
        unexpected = [
            e for e in errors if domain_error_of(e) is None and e.original_error is not None
        ]
        if unexpected:
            super().process_errors(unexpected, execution_context)


def limit_rules(limits: Limits, *, production: bool) -> tuple[type[ASTValidationRule], ...]:
    """The depth/alias (and, in production, introspection) validation rules, built ONCE.

    Strawberry's `QueryDepthLimiter`/`MaxAliasesLimiter` create a new rule class per
    instance; since `ValidationCache` keys on the rule classes, per-request instances
    would never hit the cache (measured: 0 hits in 2,200 requests). Building the classes
    once per schema and re-adding the same ones per operation keeps the cache effective.
    """
    rules: list[type[ASTValidationRule]] = [
        *QueryDepthLimiter(max_depth=limits.max_depth).validation_rules,
        *MaxAliasesLimiter(max_alias_count=limits.max_aliases).validation_rules,
    ]
    if production:
        rules.extend(DisableIntrospection().validation_rules)
    return tuple(rules)


def extension_factories(settings: Settings, limits: Limits) -> list[Callable[[], SchemaExtension]]:
    """The ordered extension factories for `settings` (one fresh instance per operation)."""
    size = limits.cache_size
    rules = limit_rules(limits, production=settings.production)
    debug = settings.debug
    return [
        lambda: SafeParserCache(maxsize=size),
        lambda: ValidationCache(maxsize=size),
        lambda: MaxTokensLimiter(max_token_count=limits.max_tokens),
        lambda: AddValidationRules(list(rules)),
        lambda: ErrorPolicy(debug=debug),
    ]


def build_schema(
    query: type,
    mutation: type | None = None,
    subscription: type | None = None,
    *,
    settings: Settings,
    types: Sequence[type] | Iterable[Any] = (),
    extensions: Sequence[Callable[[], SchemaExtension]] = (),
    limits: Limits | None = None,
) -> StatewardSchema:
    """Build the served schema: caches, depth/alias/token limits, error policy, no batching.

    In production mode introspection is off and field suggestions ("Did you mean ...")
    are removed, so the schema cannot be read by probing. Extra `extensions` factories run
    before the error policy.
    """
    lim = limits or limits_from_settings(settings)
    factories = extension_factories(settings, lim)
    factories[-1:-1] = list(extensions)
    config = StrawberryConfig(disable_field_suggestions=settings.production)
    return StatewardSchema(
        query=query,
        mutation=mutation,
        subscription=subscription,
        types=list(types),
        extensions=factories,
        config=config,
    )
