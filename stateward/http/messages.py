"""`POST /messages/{name}` (issue 15): publish a message without GraphQL.

The body is a JSON object `{"namespace", "correlationKey", "payload"?, "ttlSeconds"?,
"messageId"?}` (parsed strictly, like every GraphQL body); the caller authenticates with
the same `Authorization: Bearer <token>` as `/graphql` and needs the same role as
`publishMessage` (admin or operator of the namespace). The answer mirrors the mutation:
`{"messageId", "duplicate", "expiresAt", "delivered": [instance ids], "started": [...]}`,
or `{"errors": [{message, extensions: {code, pointer?}}]}` with 400 (bad input), 401
(no or bad token), 403, 404 (namespace not visible) or 409 (REPLAYED messageId).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from stateward.domain.errors import (
    FORBIDDEN,
    INVALID_INPUT,
    NOT_FOUND,
    REPLAYED,
    UNAUTHENTICATED,
    DomainError,
)
from stateward.http.auth import authenticate, bearer_token
from stateward.http.strict_json import RequestJSONError, load_request_json
from stateward.runtime.messages import correlate
from stateward.schema.errors import error_extensions

BODY_KEYS = ("namespace", "correlationKey", "payload", "ttlSeconds", "messageId")
_STATUS = {UNAUTHENTICATED: 401, FORBIDDEN: 403, NOT_FOUND: 404, REPLAYED: 409}


def _error(err: DomainError) -> JSONResponse:
    status = _STATUS.get(err.code, 400 if err.code != "UNAVAILABLE" else 503)
    body = {"errors": [{"message": err.message, "extensions": error_extensions(err)}]}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def _body(raw: Any) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise DomainError(INVALID_INPUT, "the body must be a JSON object", pointer="")
    for key in raw:
        if key not in BODY_KEYS:
            raise DomainError(INVALID_INPUT, f"unknown field {key!r} (allowed: "
                              f"{', '.join(BODY_KEYS)})", pointer=f"/{key}")  # fmt: skip
    for key in ("namespace", "correlationKey"):
        if not isinstance(raw.get(key), str):
            raise DomainError(INVALID_INPUT, f"{key!r} (a string) is required", pointer=f"/{key}")
    ttl = raw.get("ttlSeconds", 0)
    if isinstance(ttl, bool) or not isinstance(ttl, int):
        raise DomainError(INVALID_INPUT, "'ttlSeconds' must be an integer", pointer="/ttlSeconds")
    message_id = raw.get("messageId")
    if message_id is not None and not isinstance(message_id, str):
        raise DomainError(INVALID_INPUT, "'messageId' must be a string", pointer="/messageId")
    return raw


async def publish_endpoint(request: Request) -> JSONResponse:
    """Publish the message named in the path (see the module docstring)."""
    services = request.app.state.services
    try:
        viewer = await authenticate(services, bearer_token(request.headers.get("authorization")))
        if viewer is None:
            raise DomainError(UNAUTHENTICATED, "a bearer token is required")
        try:
            body = _body(load_request_json(await request.body()))
        except RequestJSONError as err:
            raise DomainError(err.code, err.message, pointer=err.pointer) from err
        result = await correlate.publish(
            services.runtime, viewer.actor, body["namespace"], request.path_params["name"],
            body["correlationKey"], body.get("payload"), ttl_seconds=body.get("ttlSeconds", 0),
            message_id=body.get("messageId"),
        )  # fmt: skip
    except DomainError as err:
        return _error(err)
    message = result.message
    return JSONResponse(
        {
            "messageId": message.message_id,
            "name": message.name,
            "namespace": message.namespace,
            "correlationKey": message.correlation_key,
            "duplicate": result.duplicate,
            "expiresAt": message.expires_at.isoformat().replace("+00:00", "Z"),
            "delivered": result.delivered,
            "started": result.started,
        }
    )


def message_routes() -> list[Route]:
    """The `POST /messages/{name}` route."""
    return [Route("/messages/{name}", publish_endpoint, methods=["POST"])]
