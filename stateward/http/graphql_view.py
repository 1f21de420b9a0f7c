"""The `/graphql` endpoint: Strawberry's ASGI view with our context, auth and socket policy.

- HTTP: POST JSON, GET for queries only (Strawberry refuses mutations over GET), no
  batching, no subscriptions (they need the websocket: a clear 400 says so); transport
  errors come back as JSON `{"errors": [{message, extensions.code}]}`.
- Bodies, GET `variables` and websocket frames are parsed strictly (`http/strict_json.py`):
  a refused body is a 400 with a stable code, a refused frame closes the socket with 4400.
- Media types (GraphQL over HTTP): a client whose `Accept` prefers
  `application/graphql-response+json` gets that content type, and a request that never
  reached execution (parse or validation failure, variable coercion) is then a 400 with
  no `data` entry; `application/json` (or no `Accept`) keeps the legacy 200 answer. The
  `graphql-http` audit checks this in CI (tests/client/test_graphql_http_audit.py).
- Websocket: only `graphql-transport-ws`; foreign `Origin`s refused unless allowed; the
  `connection_init` payload's `authorization` (or the handshake header) authenticates the
  socket and the viewer is kept on the connection's context; at most N concurrent
  operations per socket (error frame with code TOO_MANY_SUBSCRIPTIONS beyond that).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncGenerator, Mapping, MutableMapping
from datetime import timedelta
from typing import Any

try:  # a declared dependency; a venv made before it was added still works, more slowly
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]
from cross_web import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState
from strawberry.asgi import ASGIWebSocketAdapter, GraphQL
from strawberry.exceptions import MissingQueryError
from strawberry.http import GraphQLRequestData
from strawberry.http.exceptions import (
    NonJsonMessageReceived,
    NonTextMessageReceived,
    WebSocketDisconnected,
)
from strawberry.schema import BaseSchema
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    ConnectionInitMessage,
    SubscribeMessage,
)
from strawberry.types import ExecutionResult
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType
from strawberry.types.unset import UNSET

from stateward.domain.errors import DomainError
from stateward.http.auth import authenticate, authorization_from_params, bearer_token
from stateward.http.context import RequestContext, create_loaders
from stateward.http.graphiql import offline_graphiql_html
from stateward.http.strict_json import RequestJSONError, load_request_json
from stateward.http.ws_protocol import FRAME_WRITER, FrameWriter, text_frame
from stateward.schema.base import LIVE_OPERATION, LiveOperation
from stateward.schema.errors import ApiError, error_extensions, to_graphql_error
from stateward.settings import Settings

TOO_MANY_SUBSCRIPTIONS = "TOO_MANY_SUBSCRIPTIONS"
FORBIDDEN_ORIGIN = "FORBIDDEN_ORIGIN"
DEFAULT_MAX_SUBSCRIPTIONS = 20
_HTTP_CODES = {400: "BAD_REQUEST", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}
GRAPHQL_RESPONSE_JSON = "application/graphql-response+json"
SUBSCRIPTION_OVER_HTTP = (
    "subscriptions need the websocket: connect to this URL with graphql-transport-ws"
)


def error_response(
    status: int, code: str, message: str, media_type: str | None = None, **headers: str
) -> JSONResponse:
    """A JSON error body shaped like a GraphQL response: `{"errors": [...]}`."""
    body = {"errors": [{"message": message, "extensions": {"code": code}}]}
    return JSONResponse(body, status_code=status, headers=headers or None, media_type=media_type)


def _quality(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0
    return 1.0


def response_media_type(accept: str | None) -> str:
    """`application/graphql-response+json` when the `Accept` header asks for it at least as
    much as for `application/json` (GraphQL over HTTP, "Accept"), else `application/json`
    (no header, `*/*`, or a legacy client). Asked three times per request: the answers
    for the last few distinct headers are kept."""
    key = accept or ""
    known = _MEDIA_TYPES.get(key)
    if known is None:
        known = _media_type(key)
        if len(_MEDIA_TYPES) >= 64:
            _MEDIA_TYPES.clear()
        _MEDIA_TYPES[key] = known
    return known


_MEDIA_TYPES: dict[str, str] = {}


def _media_type(accept: str) -> str:
    best: dict[str, float] = {}
    for part in accept.split(","):
        media, *params = part.split(";")
        media = media.strip().lower()
        best[media] = max(best.get(media, 0.0), _quality(params))
    wanted = best.get(GRAPHQL_RESPONSE_JSON, 0.0)
    if wanted > 0 and wanted >= best.get("application/json", 0.0):
        return GRAPHQL_RESPONSE_JSON
    return "application/json"


def is_request_failure(result: Any) -> bool:
    """True when the operation never started executing: parse or validation failure or a
    variable that could not be coerced (no `data`, and no error has a field path)."""
    if isinstance(result, PreExecutionError):
        return True
    errors = getattr(result, "errors", None) or []
    return (
        getattr(result, "data", None) is None
        and bool(errors)
        and all(not getattr(e, "path", None) for e in errors)
    )


class SocketRejected(Exception):
    """Raised by `on_ws_connect` to close the socket with code 4403 and a clear reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason[:120]  # close reasons are limited to 123 bytes


class StrictWebSocketAdapter(ASGIWebSocketAdapter):
    """Strawberry's websocket adapter, parsing every frame with the strict loader.

    A refused frame (duplicate key, nesting over 64, NUL, ...) closes the socket with
    4400 and `CODE: message` as the reason, instead of dropping it with 1006.
    """

    async def iter_json(
        self, *, ignore_parsing_errors: bool = False
    ) -> AsyncGenerator[object, None]:
        """Yield each frame's JSON; close with 4400 on a refused one."""
        try:
            while self.ws.application_state != WebSocketState.DISCONNECTED:
                text = await self.ws.receive_text()
                try:
                    yield load_request_json(text)
                except RequestJSONError as err:
                    if err.code == "INVALID_JSON" and "line" in err.message:
                        if ignore_parsing_errors:
                            continue
                        raise NonJsonMessageReceived from err
                    await self.ws.close(code=4400, reason=f"{err.code}: {err.message}"[:120])
                    return
        except KeyError as e:
            raise NonTextMessageReceived from e
        except WebSocketDisconnect:  # pragma: no cover
            pass

    def frame_writer(self) -> FrameWriter | None:
        """The server's synchronous frame writer (`http.ws_protocol`), when it offers one."""
        extensions = self.ws.scope.get("extensions") or {}
        writer: FrameWriter | None = extensions.get(FRAME_WRITER)
        return writer

    async def send_text(self, frame: str) -> None:
        """Send one ready text frame (a `next` frame of `schema.base.LiveOperation`)."""
        try:
            await self.ws.send_text(frame)
        except WebSocketDisconnect as exc:
            raise WebSocketDisconnected from exc

    async def send_json(self, message: Mapping[str, object]) -> None:
        """Strawberry's `send_json`, except that a `next` frame whose result data is shared
        by several subscribers (one execution per event and document, `schema.base`) is
        serialised once: only the `{"id": …, "type": "next", "payload": ` prefix differs."""
        payload = message.get("payload")
        if message.get("type") != "next" or not isinstance(payload, dict) or len(payload) != 1:
            await super().send_json(message)
            return
        data = payload.get("data")
        hit = _ENCODED.get(id(data))
        if hit is None or hit[0] is not data:
            hit = (data, _dumps({"data": data}))
            _ENCODED[id(data)] = hit
            while len(_ENCODED) > ENCODED_SIZE:
                _ENCODED.popitem(last=False)
        frame = f'{{"id":{_dumps(message.get("id"))},"type":"next","payload":{hit[1]}}}'
        try:
            await self.ws.send_text(frame)
        except WebSocketDisconnect as exc:
            raise WebSocketDisconnected from exc


#: The JSON of recently sent `next` payloads by the identity of their data (kept alive, so
#: an id is not reused while it is a key).
ENCODED_SIZE = 512
_ENCODED: OrderedDict[int, tuple[object, str]] = OrderedDict()


def _dumps(value: object) -> str:
    if orjson is None:  # pragma: no cover
        return json.dumps(value)
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


class TransportWSHandler(BaseGraphQLTransportWSHandler[RequestContext, None]):
    """graphql-transport-ws with explicit close reasons and a coded subscription cap."""

    async def run_operation(self, operation: Operation[RequestContext, None]) -> None:
        """Strawberry's operation task, with a `LiveOperation` in its context: resolvers
        of shared events send their `next` frames straight to the socket (`schema.base`),
        from the fan-out loop itself when the server offers a frame writer — only while
        the operation is still this socket's (a `complete` from the client forgets it at
        once, and its id may be reused before the task has ended)."""

        websocket = self.websocket
        if isinstance(websocket, StrictWebSocketAdapter):

            async def send_text(frame: str) -> None:
                if not operation.completed:  # as Strawberry's `send_operation_message`
                    await websocket.send_text(frame)

            writer = websocket.frame_writer()
            write_frame: FrameWriter | None = None
            if writer is not None:
                operations, op_id = self.operations, operation.id

                def write_frame(frame: bytes) -> bool:
                    return (
                        not operation.completed
                        and operations.get(op_id) is operation
                        and writer(frame)
                    )

            LIVE_OPERATION.set(LiveOperation(operation.id, send_text, write_frame, text_frame))
        await super().run_operation(operation)

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        """Run the standard handshake; a rejected token closes with 4403 and the reason."""
        try:
            await super().handle_connection_init(message)
        except SocketRejected as rejected:
            await self.websocket.close(code=4403, reason=rejected.reason)

    async def handle_subscribe(self, message: SubscribeMessage) -> None:
        """Refuse an operation beyond the per-socket cap with a coded error frame."""
        limit = self.max_subscriptions_per_connection
        if (
            self.connection_acknowledged
            and limit is not None
            and message["id"] not in self.operations
            and len(self.operations) >= limit
        ):
            err = ApiError(
                TOO_MANY_SUBSCRIPTIONS,
                f"at most {limit} concurrent operations per connection",
            )
            payload = [to_graphql_error(err).formatted]
            await self.send_message({"id": message["id"], "type": "error", "payload": payload})
            return
        await super().handle_subscribe(message)


GOING_AWAY = 1001


class _Socket:
    """The ASGI `send` of one websocket, remembering whether it was accepted or closed,
    so that the server can close it from outside the handler (and the handler's later
    sends are dropped instead of failing)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.accepted = False
        self.closed = False

    async def send(self, message: MutableMapping[str, Any]) -> None:
        kind = message["type"]
        if self.closed and kind in ("websocket.send", "websocket.close"):
            return
        if kind == "websocket.accept":
            self.accepted = True
        elif kind == "websocket.close":
            self.closed = True
        await self._send(message)

    async def close(self, code: int, reason: str) -> bool:
        """Send the close frame if the socket is open; True when it was."""
        if not self.accepted or self.closed:
            return False
        try:
            await self.send({"type": "websocket.close", "code": code, "reason": reason})
        except Exception:  # already gone: nothing to close
            return False
        return True


class StatewardGraphQL(GraphQL[RequestContext, None]):
    """Strawberry's ASGI app configured from `Settings`, with `services` in every context."""

    graphql_transport_ws_handler_class = TransportWSHandler
    websocket_adapter_class = StrictWebSocketAdapter  # type: ignore[assignment]

    def __init__(
        self,
        schema: BaseSchema,
        *,
        settings: Settings,
        services: Any,
        max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS,
        connection_init_timeout: float = 10.0,
    ) -> None:
        super().__init__(
            schema,
            graphql_ide=None if settings.production else "graphiql",
            allow_queries_via_get=True,
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
            connection_init_wait_timeout=timedelta(seconds=connection_init_timeout),
            max_subscriptions_per_connection=max_subscriptions,
            allowed_origins=settings.allowed_origins,
        )
        self.settings = settings
        self.services = services
        self._sockets: dict[int, _Socket] = {}
        #: Whether every HTTP result is one `ExecutionResult` (or a batch of them): no
        #: stream transport, no incremental delivery (`run`).
        config = getattr(schema, "config", None)
        self._plain_http = not self._stream_transport_map and not getattr(
            config, "enable_experimental_incremental_execution", False
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve HTTP with JSON transport errors; websockets go to Strawberry unchanged
        (tracked, so that a shutdown can close them with 1001)."""
        if scope["type"] == "websocket":
            socket = _Socket(send)
            self._sockets[id(socket)] = socket
            try:
                await super().__call__(scope, receive, socket.send)
            finally:
                self._sockets.pop(id(socket), None)
            return
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        request = Request(scope=scope, receive=receive)
        media = response_media_type(request.headers.get("accept"))
        response: Response
        try:
            response = await self.run(request)
        except HTTPException as exc:
            code = _HTTP_CODES.get(exc.status_code, "BAD_REQUEST")
            response = error_response(exc.status_code, code, exc.reason, media)
        except RequestJSONError as err:
            response = JSONResponse({"errors": [err.as_error()]}, status_code=400, media_type=media)
        except DomainError as err:  # raised while building the context (bad token)
            response = JSONResponse(
                {"errors": [{"message": err.message, "extensions": error_extensions(err)}]},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
                media_type=media,
            )
        await response(scope, receive, send)

    def decode_json(self, data: str | bytes) -> object:
        """Every body, GET `variables` value and frame goes through the strict loader."""
        return load_request_json(data)

    def encode_json(self, data: object) -> str:
        """Answers and websocket messages with orjson: the same JSON as Strawberry's
        `json.dumps` (non-ASCII text as UTF-8 rather than escaped), ≈ 4 µs less; what
        orjson refuses (an integer past 64 bits) goes through Strawberry's. A `str`, as
        Strawberry's websocket adapter sends it as a text frame."""
        if orjson is not None:
            try:
                return orjson.dumps(data).decode()
            except TypeError:
                pass
        return str(super().encode_json(data))

    async def run(self, request: Any, context: Any = UNSET, root_value: Any = UNSET) -> Any:
        """Strawberry's `run`, except that over HTTP — where the results are plain
        `ExecutionResult`s: subscriptions over HTTP are refused (`execute_single`), and no
        stream transport nor incremental delivery is configured (`_plain_http`) — the
        result is answered without Strawberry's runtime-Protocol `isinstance` test for a
        subscription stream (≈ 9 µs per request, issue 18 `req18`)."""
        if request.scope["type"] != "http" or not self._plain_http:
            answer: Any = await super().run(request, context, root_value)
            return answer
        if root_value is UNSET:
            root_value = await self.get_root_value(request)  # type: ignore[func-returns-value]
        request_adapter = self.request_adapter_class(request)
        sub_response = await self.get_sub_response(request)
        if context is UNSET:
            context = await self.get_context(request, response=sub_response)
        if not self.is_request_allowed(request_adapter):
            raise HTTPException(405, "GraphQL only supports GET and POST requests.")
        if self.should_render_graphql_ide(request_adapter):
            if self.graphql_ide:
                return await self.render_graphql_ide(request)
            raise HTTPException(404, "Not Found")
        try:
            request_data = await self.parse_http_body(request_adapter)
        except json.decoder.JSONDecodeError as e:
            raise HTTPException(400, "Unable to parse request body as JSON") from e
        except KeyError as e:
            raise HTTPException(400, "File(s) missing in form data") from e
        result = await self.execute_operation(
            request=request,
            request_adapter=request_adapter,
            request_data=request_data,
            context=context,
            root_value=root_value,
            sub_response=sub_response,
        )
        if isinstance(result, list):  # a batch (when batching is configured)
            batch = []
            for one in result:
                processed = await self.process_result(request=request, result=one)
                if one.errors:
                    self._handle_errors(one.errors, processed)
                batch.append(processed)
            return self.create_response(response_data=batch, sub_response=sub_response)
        assert isinstance(result, ExecutionResult)
        response_data = await self.process_result(request=request, result=result)
        if result.errors:
            self._handle_errors(result.errors, response_data)
        return self.create_response(response_data=response_data, sub_response=sub_response)

    async def parse_http_body(self, request: Any) -> Any:
        """Strawberry's parsing, with a short path for the common request — a POST whose
        content type is exactly `application/json`, carrying one operation, from a client
        that asks for no streamed answer — without the `email` package's content-type
        parser and the stream-transport lookup (≈ 15 µs per request)."""
        if request.method == "POST" and request.content_type == "application/json":
            accept = (request.headers.get("accept") or "").lower()
            if "multipart" not in accept and "event-stream" not in accept:
                data = self.parse_json(await request.get_body())
                if isinstance(data, dict):
                    query = data.get("query")
                    variables = data.get("variables")
                    extensions = data.get("extensions")
                    if (
                        isinstance(query, str | None)
                        and isinstance(variables, dict | None)
                        and isinstance(extensions, dict | None)
                    ):
                        return GraphQLRequestData(
                            query=query,
                            variables=variables,
                            operation_name=data.get("operationName"),
                            extensions=extensions,
                            protocol="http",
                        )
        return await super().parse_http_body(request)

    async def execute_single(
        self,
        request: Request,
        request_adapter: Any,
        sub_response: Any,
        context: RequestContext,
        root_value: Any,
        request_data: Any,
    ) -> Any:
        """One operation over HTTP: queries (GET or POST) and mutations (POST) only.

        Strawberry also runs subscriptions over POST (and its result is a null error);
        here they get a clear 400 saying they need the websocket.
        """
        allowed = {OperationType.QUERY}
        if request_adapter.method == "POST":
            allowed.add(OperationType.MUTATION)
        media = response_media_type(request.headers.get("accept"))
        if media == GRAPHQL_RESPONSE_JSON:
            sub_response.media_type = media
        try:
            result = await self.schema.execute(
                request_data.query,
                root_value=root_value,
                variable_values=request_data.variables,
                context_value=context,
                operation_name=request_data.operation_name,
                allowed_operation_types=allowed,
                operation_extensions=request_data.extensions,
            )
        except CannotGetOperationTypeError as e:
            raise HTTPException(400, e.as_http_error_reason()) from e
        except InvalidOperationTypeError as e:
            if e.operation_type == OperationType.SUBSCRIPTION:
                raise HTTPException(400, SUBSCRIPTION_OVER_HTTP) from e
            raise HTTPException(400, e.as_http_error_reason(request_adapter.method)) from e
        except MissingQueryError as e:
            raise HTTPException(400, "No GraphQL query found in the request") from e
        if media == GRAPHQL_RESPONSE_JSON and is_request_failure(result):
            sub_response.status_code = 400
        return result

    async def process_result(self, request: Request, result: Any) -> Any:
        """Strawberry's result body, without `data` when a `graphql-response+json` client's
        request failed before execution (the spec: the entry must then be absent)."""
        body = await super().process_result(request, result)
        if (
            response_media_type(request.headers.get("accept")) == GRAPHQL_RESPONSE_JSON
            and is_request_failure(result)
            and isinstance(body, dict)
        ):
            body.pop("data", None)
        return body

    def create_response(self, response_data: Any, sub_response: Response) -> Response:
        """Strawberry's JSON response with the negotiated media type (`execute_single`
        sets `graphql-response+json` on the sub-response when the client asked for it)."""
        response = super().create_response(response_data, sub_response)
        if sub_response.media_type == GRAPHQL_RESPONSE_JSON:
            response.headers["content-type"] = f"{GRAPHQL_RESPONSE_JSON}; charset=utf-8"
        return response

    async def close_sockets(
        self, code: int = GOING_AWAY, reason: str = "server shutting down"
    ) -> int:
        """Close every open websocket with `code` (1001 "going away": the node is stopping;
        subscribers resume elsewhere with `after`). Returns how many were closed."""
        closed = 0
        for socket in list(self._sockets.values()):
            if await socket.close(code, reason):
                closed += 1
        return closed

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> RequestContext:
        """Build the per-request context; HTTP callers are authenticated here."""
        ctx = RequestContext(
            settings=self.settings, services=self.services, request=request, response=response
        )
        if request.scope["type"] == "http":
            ctx.token = bearer_token(request.headers.get("authorization"))
            ctx.viewer = await authenticate(self.services, ctx.token)
        ctx.loaders = create_loaders(ctx)
        return ctx

    async def on_ws_connect(self, context: RequestContext) -> Any:
        """Authenticate the socket from `connection_init` (or the handshake header)."""
        try:
            value = authorization_from_params(context.connection_params)
            if value is None:
                value = context.request.headers.get("authorization")
            context.token = bearer_token(value)
            context.viewer = await authenticate(self.services, context.token)
        except DomainError as err:
            raise SocketRejected(f"{err.code}: {err.message}") from err
        return UNSET if context.viewer is None else {"authenticated": True}

    async def render_graphql_ide(self, request: Request) -> Response:
        """The GraphiQL page, loading only vendored assets from this server."""
        return HTMLResponse(offline_graphiql_html(request.scope.get("root_path", "")))

    async def reject_websocket(self, request: WebSocket) -> WebSocket:
        """Refuse a handshake from a foreign Origin: 403 with a JSON reason when possible."""
        if "websocket.http.response" in request.scope.get("extensions", {}):
            origin = request.headers.get("origin", "")
            await request.send_denial_response(
                error_response(403, FORBIDDEN_ORIGIN, f"origin {origin!r} is not allowed")
            )
        else:
            await request.close(code=1008, reason=f"{FORBIDDEN_ORIGIN}: origin not allowed")
        return request
