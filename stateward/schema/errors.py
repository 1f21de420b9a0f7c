"""How failures leave the GraphQL layer: one place that maps errors to `extensions.code`.

Resolvers just `raise DomainError(...)` (or `ApiError(...)` for API-level refusals such as
UNAUTHENTICATED). `ErrorPolicy`, a Strawberry schema extension, rewrites every error of a
result exactly once, for queries, mutations and each subscription frame alike:

- a `DomainError` becomes a GraphQL error carrying `extensions.code` and, when it has
  problems, `extensions.problems` (`[{code, message, pointer}]`);
- a GraphQL syntax error gets `GRAPHQL_PARSE_FAILED`; any other error WITHOUT a `path` is
  about the request itself (validation, a variable of the wrong type, an integer literal
  Python will not convert) and gets `GRAPHQL_VALIDATION_FAILED`: a client mistake, never
  INTERNAL_ERROR; an exception that ends a running subscription stream (no path and no
  location either) is not one of these;
- a transient database fault (a dropped or killed connection) that reached the API from a
  read with no retry of its own becomes `UNAVAILABLE`: the client may try again; it says
  nothing about its request and is not a bug in it (it is still logged);
- anything else (an exception inside a resolver) is a bug: masked as "Unexpected error."
  with code INTERNAL_ERROR unless `settings.debug` is on.

Every message shown is clipped to `MAX_MESSAGE` characters, so a 100 KB literal is never
echoed back (or logged); in production every "Did you mean ...?" hint is removed, for
fields, types, arguments and input fields alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from graphql import GraphQLError, GraphQLSyntaxError
from strawberry.extensions import MaskErrors

from stateward.domain.errors import DomainError
from stateward.runtime.core.queries import unavailable_refusal

INTERNAL_ERROR = "INTERNAL_ERROR"
GRAPHQL_PARSE_FAILED = "GRAPHQL_PARSE_FAILED"
GRAPHQL_VALIDATION_FAILED = "GRAPHQL_VALIDATION_FAILED"
MASKED_MESSAGE = "Unexpected error."
MAX_MESSAGE = 240
_SUGGESTION = re.compile(r"\s*Did you mean [^?]*\?")


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` cut to `limit` characters (with an ellipsis when cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def without_suggestions(message: str) -> str:
    """`message` with every "Did you mean ...?" hint removed."""
    return _SUGGESTION.sub("", message)


class ApiError(DomainError):
    """A refusal decided by the API layer (UNAUTHENTICATED, RATE_LIMITED, ...), not the domain.

    It is a `DomainError` so that every layer treats it the same way: an expected failure
    with a stable code that is shown to the client, never masked.
    """


def error_extensions(err: DomainError) -> dict[str, Any]:
    """The `extensions` object for a domain error: code, plus pointer/problems/details if set."""
    ext: dict[str, Any] = {"code": err.code}
    if err.pointer:
        ext["pointer"] = clip(err.pointer)
    if err.problems:
        ext["problems"] = [
            {**p.as_dict(), "message": clip(p.message), "pointer": clip(p.pointer)}
            for p in err.problems
        ]
    if err.details:
        ext["details"] = dict(err.details)
    return ext


def to_graphql_error(err: DomainError, template: GraphQLError | None = None) -> GraphQLError:
    """A `GraphQLError` for `err` with `extensions.code` (and problems), located like `template`.

    Use it when a GraphQL error must be built by hand (e.g. a websocket error frame);
    resolvers do not need it: raising the `DomainError` is enough.
    """
    return GraphQLError(
        clip(err.message),
        nodes=template.nodes if template else None,
        source=template.source if template else None,
        positions=template.positions if template else None,
        path=template.path if template else None,
        original_error=err,
        extensions=error_extensions(err),
    )


def domain_error_of(error: GraphQLError) -> DomainError | None:
    """The `DomainError` behind a GraphQL error, if any (following wrapped GraphQL errors)."""
    original: BaseException | None = error.original_error
    while isinstance(original, GraphQLError):
        original = original.original_error
    return original if isinstance(original, DomainError) else None


def unavailable_of(error: GraphQLError) -> DomainError | None:
    """`UNAVAILABLE` when a transient database fault is behind a GraphQL error."""
    original: BaseException | None = error.original_error
    while isinstance(original, GraphQLError):
        original = original.original_error
    return None if original is None else unavailable_refusal(original)


def is_request_error(error: GraphQLError) -> bool:
    """True when the error is the client's: a domain refusal, or an error about the request
    itself (parse, validation, variable coercion: no `path`) rather than a resolver's bug.

    Errors without an original exception come from parsing/validation of the request
    (depth, aliases, tokens, unknown fields); errors without a path were raised before any
    field ran (e.g. `int()` refusing a 5,000-digit literal while validating it).
    """
    if domain_error_of(error) is not None:
        return True
    original = error.original_error
    while isinstance(original, GraphQLError):
        original = original.original_error
    if original is None:
        return True
    # An exception with no path is the request's only when it points into the document
    # (a literal or variable GraphQL could not coerce). One with neither path nor location
    # escaped a subscription's event stream after it started (Strawberry wraps it without
    # either): a server failure, never GRAPHQL_VALIDATION_FAILED (issue 11).
    return not error.path and bool(error.nodes or error.locations)


def make_should_mask_error(debug: bool) -> Callable[[GraphQLError], bool]:
    """The `MaskErrors` filter: mask every unexpected error unless `debug` is on."""

    def should_mask_error(error: GraphQLError) -> bool:
        return not debug and not is_request_error(error) and unavailable_of(error) is None

    return should_mask_error


class ErrorPolicy(MaskErrors):
    """`MaskErrors` that also stamps `extensions.code` on every error it lets through."""

    def __init__(self, *, debug: bool = False, hide_suggestions: bool = False) -> None:
        super().__init__(
            should_mask_error=make_should_mask_error(debug), error_message=MASKED_MESSAGE
        )
        self.debug = debug
        self.hide_suggestions = hide_suggestions

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        """Replace an unexpected error by a generic one with code INTERNAL_ERROR."""
        masked = super().anonymise_error(error)
        masked.extensions = {"code": INTERNAL_ERROR}
        return masked

    def _process_errors(self, errors: list[GraphQLError]) -> list[GraphQLError]:
        return [self._shape(error) for error in super()._process_errors(errors)]

    def _process_result(self, result: object) -> None:
        """`MaskErrors._process_result` without its `isinstance` check against a runtime
        Protocol (a scan of the protocol's attributes on every operation, issue 18)."""
        errors = getattr(result, "errors", None)
        if errors:
            result.errors = self._process_errors(errors)  # type: ignore[attr-defined]

    def _shape(self, error: GraphQLError) -> GraphQLError:
        message = without_suggestions(error.message) if self.hide_suggestions else error.message
        error.message = clip(message)
        if error.extensions and "code" in error.extensions:
            return error
        domain = domain_error_of(error) or unavailable_of(error)
        if domain is not None:
            return to_graphql_error(domain, template=error)
        if isinstance(error, GraphQLSyntaxError):
            code = GRAPHQL_PARSE_FAILED
        elif is_request_error(error):
            code = GRAPHQL_VALIDATION_FAILED
        else:
            code = INTERNAL_ERROR
        error.extensions = {**(error.extensions or {}), "code": code}
        return error
