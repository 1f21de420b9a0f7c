"""The per-request GraphQL context and the optional hooks a `services` object may offer.

Resolvers read `info.context` (a `RequestContext`): settings, the services object passed
to `create_app`, the viewer (or None for anonymous callers), the request/websocket and a
`loaders` dict of per-request DataLoaders, built here from `services.runtime`
(`create_loaders`): the runtime below never names the GraphQL layer's loaders.

`services` is any object; the app uses these attributes when present (all optional):

    async def authenticate(token: str) -> Viewer | None   # bearer token -> viewer
    async def ready() -> bool | Mapping[str, bool] | None  # readiness probe (/readyz)
    async def start() -> None / async def stop() -> None   # app lifespan
    runtime: Runtime                                       # reads and the DataLoaders
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from stateward.domain.errors import UNAUTHENTICATED
from stateward.http.client_ip import resolve_client_ip, trusted_networks
from stateward.resolvers.loaders import create_loaders as loaders_for
from stateward.schema.errors import ApiError
from stateward.settings import Settings


@dataclass
class RequestContext:
    """What a resolver may read about the current request (one per HTTP request or socket)."""

    settings: Settings
    services: Any
    request: Request | WebSocket
    response: Response | WebSocket | None = None
    viewer: Any = None
    token: str | None = None
    connection_params: dict[str, Any] = field(default_factory=dict)
    loaders: dict[str, Any] = field(default_factory=dict)

    @property
    def is_websocket(self) -> bool:
        """True for a subscription socket, False for a plain HTTP request."""
        return self.request.scope["type"] == "websocket"

    @property
    def client_ip(self) -> str | None:
        """The client address for per-IP rate limits: the peer as the ASGI server saw it,
        or, when that peer is a trusted proxy, the right-most untrusted `X-Forwarded-For`
        entry (`http/client_ip.py`)."""
        client = self.request.client
        peer = client.host if client else None
        if not self.settings.trusted_proxies:
            return peer
        forwarded = self.request.headers.getlist("x-forwarded-for")
        return resolve_client_ip(peer, forwarded, trusted_networks(self.settings.trusted_proxies))

    def require_viewer(self) -> Any:
        """The authenticated viewer, or an UNAUTHENTICATED error for anonymous callers."""
        if self.viewer is None:
            raise ApiError(UNAUTHENTICATED, "authentication required: send a Bearer token")
        return self.viewer


def create_loaders(context: RequestContext) -> dict[str, Any]:
    """Fresh DataLoaders for a socket over `services.runtime` (none when the services
    have no runtime): they batch per tick but never cache rows, as its context lives as
    long as the socket (`resolvers.loaders.create_loaders`). An HTTP request gets none
    here: `resolvers.loaders.loaders` makes its caching ones when a field first needs
    them (five DataLoaders per mutation that reads no row were ≈ 2 % of its CPU)."""
    runtime = getattr(context.services, "runtime", None)
    if runtime is None or not context.is_websocket:
        return {}  # an HTTP request's caching loaders are made on first use (`loaders`)
    return loaders_for(runtime, cache=False)
