"""Schema construction: one helper that turns root types into a hardened `strawberry.Schema`.

Every schema the app serves goes through `build_schema`, so the request limits, caches,
introspection policy and error policy are the same everywhere (tests included).
Extensions are passed as factories (Strawberry builds fresh instances per operation), never
as shared instances.
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import orjson
import strawberry
from graphql import ASTValidationRule, GraphQLError, OperationType
from graphql.language import DocumentNode
from graphql.language.parser import parse
from strawberry.extensions import DisableIntrospection, SchemaExtension
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.scalars import JSON
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext, validate_document
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.execution import PreExecutionError

from stateward.schema.cost import cost_rule, token_limit_message, too_many_tokens
from stateward.schema.descriptions import describe
from stateward.schema.errors import GRAPHQL_PARSE_FAILED, ErrorPolicy, is_request_error
from stateward.schema.extension_runner import CachedHooksRunner
from stateward.schema.leaves import PlainLeafFields
from stateward.schema.literals import NoNulLiteralRule
from stateward.settings import Settings

__all__ = ["JSON", "Limits", "StatewardSchema", "build_schema", "limits_from_settings"]


@dataclass(frozen=True)
class Limits:
    """Per-document limits, on by default (DESIGN §10). Override through `settings.extra`."""

    max_depth: int = 12
    max_aliases: int = 30
    max_tokens: int = 5000
    max_fields: int = 2000
    cache_size: int = 1024


def limits_from_settings(settings: Settings) -> Limits:
    """Limits read from `settings.extra` keys `graphql_max_depth|aliases|tokens`, else defaults."""
    extra = settings.extra or {}
    base = Limits()
    return Limits(
        max_depth=int(extra.get("graphql_max_depth", base.max_depth)),
        max_aliases=int(extra.get("graphql_max_aliases", base.max_aliases)),
        max_tokens=int(extra.get("graphql_max_tokens", base.max_tokens)),
        max_fields=int(extra.get("graphql_max_fields", base.max_fields)),
        cache_size=int(extra.get("graphql_cache_size", base.cache_size)),
    )


class RequestPolicy(ErrorPolicy):
    """The document limits, the caches and the error policy as ONE extension (issue 18:
    extension plumbing was about a third of Strawberry's cost per operation; every
    extension is built per operation and costs a context manager per hook it implements).

    It is the `ErrorPolicy` (masking and codes at the end of the operation) and does what
    `ParserCache`, `ValidationCache`, `MaxTokensLimiter` and `AddValidationRules` did:
    parse through a shared LRU cache (on a syntax error the document is left unset, so
    Strawberry parses again on its normal path and reports the error through every
    extension's end-of-operation step: Strawberry 0.341's `ParserCache` raised it from its
    hook and skipped them), give the parser the token limit, add the cost rules, and
    validate through a shared LRU cache keyed on the schema, the (cached, so identical)
    document and the rule classes (built once per schema, `limit_rules`).
    """

    def __init__(
        self,
        *,
        max_tokens: int,
        rules: tuple[type[ASTValidationRule], ...],
        parse: Callable[..., DocumentNode],
        validate: Callable[..., list[GraphQLError]],
        debug: bool = False,
        hide_suggestions: bool = False,
    ) -> None:
        super().__init__(debug=debug, hide_suggestions=hide_suggestions)
        self.max_tokens = max_tokens
        self.rules = rules
        self.parse = parse
        self.validate = validate

    def on_operation(self) -> Iterator[None]:
        """Give the parser the token limit and the validator the cost rules; at the end,
        the error policy."""
        ctx = self.execution_context
        ctx.parse_options["max_tokens"] = self.max_tokens
        ctx.validation_rules = ctx.validation_rules + self.rules
        yield from super().on_operation()

    def on_parse(self) -> Iterator[None]:
        """Parse through the shared LRU cache; on a syntax error, defer to Strawberry."""
        ctx = self.execution_context
        try:
            ctx.graphql_document = self.parse(ctx.query, **ctx.parse_options)
        except GraphQLError:
            ctx.graphql_document = None
        yield

    def on_validate(self) -> Iterator[None]:
        """Validate through the shared LRU cache."""
        ctx = self.execution_context
        ctx.pre_execution_errors = self.validate(
            ctx.schema._schema, ctx.graphql_document, ctx.validation_rules
        )
        yield


class PerEventExecutionContext(PlainLeafFields, StrawberryGraphQLCoreExecutionContext):
    """Strawberry's execution context, except that plain leaf fields are completed
    directly (`schema/leaves.py`) and each subscription event gets its own sub-field memo.

    graphql-core 3.3 runs every subscription event on a shallow copy of the
    subscription's executor, so all events share its `_relevant_sub_fields` memo, keyed
    by the identity of a field list that is new for every event and kept alive by the
    memo: every delivered event added an entry that lived as long as the subscription
    (measured: about 1.5 KB per delivery, `bench/memory.py`). A fresh memo per event
    is bounded by the size of one result.
    """

    #: Set per event when its result may be shared (see `execute_operation`).
    _shared_key: tuple[int, int, str] | None = None
    #: `_variables_key` of this operation's variables, computed once.
    _vars_key: str | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.operation.operation is OperationType.SUBSCRIPTION:
            live = LIVE_OPERATION.get()
            if live is not None and live.executor is None:
                live.executor = self

    def _shared_key_for(self, payload: Any) -> tuple[int, int, str]:
        vars_key = self._vars_key
        if vars_key is None:
            vars_key = self._vars_key = _variables_key(self.variable_values)
        return (id(payload), id(self.operation), vars_key)

    def build_per_event_executor(self, payload: Any) -> Any:
        executor: Any = super().build_per_event_executor(payload)
        executor._relevant_sub_fields = {}
        executor._leaf_plans = None  # keyed like the memo above, so per event too
        if getattr(payload, "shared_frame", False):
            executor._shared_key = self._shared_key_for(payload)
        return executor

    def shared_body(self, root: Any) -> SharedBody | None:
        """The `{"data": …}` JSON of this subscription's selection on `root` when it is
        already known (another subscriber with the same document and variables got this
        event), else None (`compute_shared_body`)."""
        hit = _SHARED_BODIES.get(self._shared_key_for(root))
        if hit is not None and hit.root is root and hit.operation is self.operation:
            return hit
        return None

    async def compute_shared_body(self, root: Any) -> SharedBody | None:
        """Execute the selection on a `shared_frame` root once for every subscriber with
        this document and variables and keep its `{"data": …}` JSON; None when `root` is
        not shareable or the result has errors (those go through Strawberry's path, which
        masks and codes them)."""
        if not getattr(root, "shared_frame", False):
            return None
        hit = self.shared_body(root)
        if hit is not None:
            return hit
        result = self.build_per_event_executor(root).execute_operation(False)
        if self.is_awaitable(result):
            result = await result
        return self._keep_body(root, result)

    def compute_shared_body_now(self, root: Any) -> SharedBody | None:
        """`compute_shared_body` without waiting (the fan-out loop's path): also None
        when the selection does not complete synchronously (an async resolver)."""
        if not getattr(root, "shared_frame", False):
            return None
        hit = self.shared_body(root)
        if hit is not None:
            return hit
        result = self.build_per_event_executor(root).execute_operation(False)
        if self.is_awaitable(result):
            close = getattr(result, "close", None)
            if close is not None:
                close()
            return None
        return self._keep_body(root, result)

    def _keep_body(self, root: Any, result: Any) -> SharedBody | None:
        if getattr(result, "errors", None) or getattr(result, "extensions", None):
            return None
        body = SharedBody(root, self.operation, _dumps({"data": result.data}))
        _SHARED_BODIES[self._shared_key_for(root)] = body
        while len(_SHARED_BODIES) > SHARED_RESULTS_SIZE:
            _SHARED_BODIES.popitem(last=False)
        return body

    def build_response(self, data: Any) -> Any:
        """The operation's response, and then the executor's reference cycle broken.

        graphql-core's executor holds `async_helpers`, whose two callables are bound
        methods of the executor itself: a cycle. So after every operation the executor
        and all it reached (variables, collected fields, the request context, Starlette's
        request and response, the HTTP cycle) were left to the cyclic collector, about
        57 objects per request, instead of being freed when the request ended
        (docs/performance.md, `gc18`). No resolver runs after the response is built (no
        incremental delivery here); a per-event executor is a shallow copy sharing its
        subscription's helpers, so dropping its own reference leaves them in place."""
        response = super().build_response(data)
        self.__dict__.pop("async_helpers", None)
        return response

    def execute_operation(self, serially: bool | None = None) -> Any:
        """Execute once per (event, document, variables) when the event's root says its
        result is the same for every subscriber allowed to receive it (`shared_frame`:
        `BusEvent`, which carries no viewer-dependent field); the subscribers of that
        event with the same document and variables reuse the result. Who may receive the
        event is decided per subscriber before this runs, so sharing never widens it."""
        key = self._shared_key
        if key is None:
            return super().execute_operation(serially)
        hit = _SHARED_RESULTS.get(key)
        if hit is not None and hit[0] is self.root_value and hit[1] is self.operation:
            return hit[2]
        result = super().execute_operation(serially)
        root, operation = self.root_value, self.operation

        def keep(done: Any) -> Any:
            if not getattr(done, "errors", None):
                _SHARED_RESULTS[key] = (root, operation, done)
                while len(_SHARED_RESULTS) > SHARED_RESULTS_SIZE:
                    _SHARED_RESULTS.popitem(last=False)
            return done

        if self.is_awaitable(result):

            async def later() -> Any:
                return keep(await result)

            return later()
        return keep(result)


#: Recent shared subscription results: (event, operation, variables) -> (event, operation,
#: result); the strong references keep the ids in the key from being reused meanwhile.
SHARED_RESULTS_SIZE = 512
_SHARED_RESULTS: OrderedDict[tuple[int, int, str], tuple[Any, Any, Any]] = OrderedDict()


class SharedBody:
    """The `{"data": …}` JSON of one (event, document, variables), and the ready websocket
    frames built from it for the first few operation ids (`LiveOperation.send_now`)."""

    __slots__ = ("frames", "operation", "root", "text")

    def __init__(self, root: Any, operation: Any, text: str) -> None:
        self.root = root  # kept alive: its id is part of the key
        self.operation = operation
        self.text = text
        self.frames: dict[str, bytes] = {}


#: Ready frames kept per body: clients often number their operations alike ("1"), but
#: with random ids every frame differs, and 512 bodies × 1,000 sockets would pin ~70 MB.
FRAMES_PER_BODY = 8

#: The `{"data": …}` JSON of recent shared results, keyed as `_SHARED_RESULTS`.
_SHARED_BODIES: OrderedDict[tuple[int, int, str], SharedBody] = OrderedDict()


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # what orjson refuses (an integer past 64 bits): the standard library
        return json.dumps(value)


class LiveOperation:
    """One graphql-transport-ws subscription operation whose `next` frames the node may
    send itself (issue 18, fan-out that encodes once).

    The websocket handler puts one in `LIVE_OPERATION` in the operation's task; the
    subscription's executor registers itself on it. A resolver whose events are
    `shared_frame` roots (`BusEvent`) then calls `send(root)`: the selection's JSON is
    looked up (or executed once) for the (event, document, variables) and written to the
    socket behind the operation's `{"id":…,"type":"next","payload":` prefix — without
    Strawberry's per-event result handling, graphql-core's per-event executor copy and a
    JSON encoding per subscriber. Who may receive the event is decided by the resolver
    before it calls `send`, exactly as before. `send` answers False when it can't (no
    executor, a root that isn't shareable, a result with errors): the resolver then yields
    the root the usual way, so errors are still masked and coded by Strawberry.

    `send_now(root)` is the same without waiting, called from the fan-out loop itself:
    when the transport offers a synchronous writer (`write_frame`, with `frame` building
    a ready websocket frame from the text), the frame — the same bytes for every
    subscriber whose operation has the same id — is written at once; False (nothing
    written) when it can't be, and the payload then takes the subscriber's queue.
    """

    __slots__ = ("executor", "frame", "prefix", "send_text", "write_frame")

    def __init__(
        self,
        operation_id: str,
        send_text: Callable[[str], Awaitable[None]],
        write_frame: Callable[[bytes], bool] | None = None,
        frame: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self.executor: PerEventExecutionContext | None = None
        self.prefix = f'{{"id":{_dumps(operation_id)},"type":"next","payload":'
        self.send_text = send_text
        self.write_frame = write_frame if frame is not None else None
        self.frame = frame

    async def send(self, root: Any) -> bool:
        """Send `root`'s frame; False when it must go through Strawberry instead."""
        executor = self.executor
        if executor is None:
            return False
        body = executor.shared_body(root)
        if body is None:
            body = await executor.compute_shared_body(root)
            if body is None:
                return False
        await self.send_text(self.prefix + body.text + "}")
        return True

    def send_now(self, root: Any) -> bool:
        """Write `root`'s frame at once; False (nothing written) when it can't be."""
        write, executor = self.write_frame, self.executor
        if write is None or executor is None:
            return False
        body = executor.shared_body(root) or executor.compute_shared_body_now(root)
        if body is None:
            return False
        prefix = self.prefix
        ready = body.frames.get(prefix)
        if ready is None:
            assert self.frame is not None
            ready = self.frame((prefix + body.text + "}").encode())
            if len(body.frames) < FRAMES_PER_BODY:
                body.frames[prefix] = ready
        return write(ready)


#: The live operation of the current task (set by the websocket handler per operation).
LIVE_OPERATION: ContextVar[LiveOperation | None] = ContextVar(
    "stateward_live_operation", default=None
)


def _variables_key(values: Any) -> str:
    values = getattr(values, "coerced", values)  # graphql-core's VariableValues
    try:
        return json.dumps(values, sort_keys=True, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        return repr(values)


class StatewardSchema(strawberry.Schema):
    """A `strawberry.Schema` that refuses over-long documents before parsing them and logs
    only unexpected errors (domain refusals and client mistakes are data, not bugs)."""

    max_tokens: int | None = None

    def create_extensions_runner(
        self, execution_context: ExecutionContext, extensions: list[SchemaExtension]
    ) -> SchemaExtensionsRunner:
        """Strawberry's runner, building each hook's context manager once per class
        (`schema/extension_runner.py`)."""
        return CachedHooksRunner(execution_context=execution_context, extensions=extensions)

    def process_errors(
        self,
        errors: list[GraphQLError],
        execution_context: ExecutionContext | None = None,
    ) -> None:
        """Log errors that are bugs; skip domain errors and client document errors."""
        unexpected = [e for e in errors if not is_request_error(e)]
        if unexpected:
            super().process_errors(unexpected, execution_context)

    def _token_error(self, query: str | None) -> GraphQLError | None:
        limit = self.max_tokens
        if limit is None or not too_many_tokens(query, limit):
            return None
        return GraphQLError(token_limit_message(limit), extensions={"code": GRAPHQL_PARSE_FAILED})

    async def execute(self, query: str | None, *args: Any, **kwargs: Any) -> ExecutionResult:
        """Strawberry's `execute`, except a document over the token limit is not parsed."""
        error = self._token_error(query)
        if error is not None:
            return PreExecutionError(data=None, errors=[error])
        return await super().execute(query, *args, **kwargs)

    async def stream(self, query: str | None, *args: Any, **kwargs: Any) -> Any:
        """Strawberry's `stream` (websocket operations), with the same token gate."""
        error = self._token_error(query)
        if error is not None:
            return _single(PreExecutionError(data=None, errors=[error]))
        return await super().stream(query, *args, **kwargs)


async def _single(result: ExecutionResult) -> AsyncGenerator[ExecutionResult, None]:
    yield result


def limit_rules(limits: Limits, *, production: bool) -> tuple[type[ASTValidationRule], ...]:
    """The cost (and, in production, introspection) validation rules, built ONCE.

    The cost rule (`schema/cost.py`) replaces Strawberry's `QueryDepthLimiter` and
    `MaxAliasesLimiter`, which re-walk every fragment spread (exponential on fan-out).
    Rule classes are built once per schema: `ValidationCache` keys on the rule classes, so
    per-request classes would never hit the cache.
    """
    rules: list[type[ASTValidationRule]] = [
        cost_rule(
            max_depth=limits.max_depth,
            max_aliases=limits.max_aliases,
            max_fields=limits.max_fields,
        ),
        NoNulLiteralRule,
    ]
    if production:
        rules.extend(DisableIntrospection().validation_rules)
    return tuple(rules)


def extension_factories(settings: Settings, limits: Limits) -> list[Callable[[], SchemaExtension]]:
    """The ordered extension factories for `settings` (one fresh instance per operation):
    one `RequestPolicy` over parse and validation caches shared by every operation."""
    rules = limit_rules(limits, production=settings.production)
    parse = parse_cache(limits.cache_size)
    validate = validation_cache(limits.cache_size)
    debug, production, max_tokens = settings.debug, settings.production, limits.max_tokens

    def policy() -> SchemaExtension:
        return RequestPolicy(
            max_tokens=max_tokens,
            rules=rules,
            parse=parse,
            validate=validate,
            debug=debug,
            hide_suggestions=production,
        )

    return [policy]


@functools.cache
def parse_cache(size: int) -> Callable[..., DocumentNode]:
    """graphql-core's `parse` behind an LRU cache of `size` documents (one per size)."""
    return functools.lru_cache(maxsize=size)(parse)


@functools.cache
def validation_cache(size: int) -> Callable[..., list[GraphQLError]]:
    """Strawberry's `validate_document` behind an LRU cache (one per size)."""
    return functools.lru_cache(maxsize=size)(validate_document)


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
    are removed, so the schema cannot be read by probing. Extra `extensions` factories come
    first: their parse and validate hooks wrap the cached steps, and their end of the
    operation runs after the error policy (Strawberry ends hooks in reverse order).
    """
    lim = limits or limits_from_settings(settings)
    factories = [*extensions, *extension_factories(settings, lim)]
    config = StrawberryConfig(disable_field_suggestions=settings.production)
    schema = StatewardSchema(
        query=query,
        mutation=mutation,
        subscription=subscription,
        types=list(types),
        extensions=factories,
        config=config,
        execution_context_class=PerEventExecutionContext,
    )
    schema.max_tokens = lim.max_tokens
    describe(schema._schema)  # the catalogue first: a specific text beats a common one
    describe_common_arguments(schema._schema)
    return schema


#: Arguments that mean the same on every field that takes them (a field may still say
#: more with its own description, which is kept).
COMMON_ARGUMENTS = {
    "first": "Page size forward (default 20, at most 100).",
    "after": "Cursor to page forward from (an edge's `cursor` or `pageInfo.endCursor`).",
    "last": "Page size backward (at most 100).",
    "before": "Cursor to page backward from (an edge's `cursor` or `pageInfo.startCursor`).",
    "namespace": "The namespace, e.g. `acme/loans`.",
}


def describe_common_arguments(schema: Any) -> None:
    """Give every argument named in `COMMON_ARGUMENTS` that has no description its
    common one, so each paging argument reads the same in GraphiQL and the SDL."""
    for named in schema.type_map.values():
        for field in (getattr(named, "fields", None) or {}).values():
            for name, argument in (getattr(field, "args", None) or {}).items():
                if not argument.description and name in COMMON_ARGUMENTS:
                    argument.description = COMMON_ARGUMENTS[name]
