"""The Starlette app factory: `create_app(settings) -> Starlette`.

Nothing connects at import time: services start in the app's lifespan and stop when it
ends. Routes: `/graphql` (HTTP `Route` + `WebSocketRoute` on the same Strawberry view; a
`Mount` would break the websocket), `/healthz`, `/readyz`, `POST /messages/{name}`, and
in development the vendored GraphiQL assets under `/static/graphiql` and the built
documentation site under `/docs` (when `make docs` has built it). Every request passes the
body-size limit first.
Observability (`stateward.observe`): every request gets an `X-Request-ID`; `/metrics`
when `settings.metrics` (and not on a separate `metrics_port`); a SERVER span per request
(`ServerSpanMiddleware`) when tracing is configured. `/dashboard` (the operations page,
see `http/dashboard.py`) in development, in production only with `settings.dashboard`.

Browsers on other origins: Starlette's `CORSMiddleware` answers preflights and adds the
CORS headers only for the origins in STATEWARD_ALLOWED_ORIGINS (the same list the
websocket origin check uses); with none configured no CORS header is ever sent, so a
browser keeps a page from another origin from reading any response (same-origin only).
Credentials (cookies) are never allowed: callers authenticate with a bearer token.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from strawberry.schema import BaseSchema

from stateward.http.body_limit import BodyLimitMiddleware
from stateward.http.dashboard import dashboard_routes
from stateward.http.docs_site import docs_routes
from stateward.http.graphiql import STATIC_DIR, STATIC_PATH, offline_graphiql_html
from stateward.http.graphql_view import DEFAULT_MAX_SUBSCRIPTIONS, StatewardGraphQL
from stateward.http.health import healthz, readyz
from stateward.http.messages import message_routes
from stateward.observe import metrics, tracing
from stateward.observe.http import (
    RequestIdMiddleware,
    ServerSpanMiddleware,
    metrics_endpoint,
    sampling,
)
from stateward.settings import Settings

# Where the default schema and services come from when the caller passes none.
SCHEMA_FACTORY = "stateward.schema.root:create_schema"
SERVICES_FACTORY = "stateward.runtime.container:create_services"


def create_app(
    settings: Settings,
    *,
    schema: BaseSchema | None = None,
    services: Any = None,
    max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS,
) -> Starlette:
    """Build the ASGI app for `settings`.

    `schema` defaults to `stateward.schema.root.create_schema(settings)` and `services` to
    `stateward.runtime.container.create_services(settings)`. `services` may offer
    `authenticate(token)`, `ready()`, `start()`, `stop()` and a `runtime` (reads and the
    DataLoaders, see `stateward.http.context`); whatever it lacks is simply not used.
    """
    if schema is None:
        schema = _load(SCHEMA_FACTORY)(settings)
    if services is None:
        services = _load(SERVICES_FACTORY)(settings)
    view = StatewardGraphQL(
        schema, settings=settings, services=services, max_subscriptions=max_subscriptions
    )
    routes: list[BaseRoute] = [
        Route("/graphql", view, name="graphql"),
        WebSocketRoute("/graphql", view, name="graphql-ws"),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        *message_routes(),
    ]
    if settings.metrics or settings.metrics_port is not None:
        metrics.enable()
    if settings.metrics and settings.metrics_port is None:
        routes.append(Route("/metrics", metrics_endpoint, methods=["GET"]))
    routes.extend(dashboard_routes(settings))
    if view.graphql_ide:
        offline_graphiql_html()  # fail at startup, not on first page view, if assets are stale
        routes.append(Mount(STATIC_PATH, app=StaticFiles(directory=STATIC_DIR), name="graphiql"))
    routes.extend(docs_routes(settings))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        start = getattr(services, "start", None)
        if start is not None:
            await start()
        app.state.lifecycle = "ready"
        try:
            async with sampling(services):
                yield
        finally:
            app.state.lifecycle = "stopping"
            await view.close_sockets()  # 1001, before the bus and the database go away
            stop = getattr(services, "stop", None)
            if stop is not None:
                await stop()

    middleware = [Middleware(RequestIdMiddleware)]
    tracing.configure_from_env()
    if tracing.enabled():
        middleware.insert(0, Middleware(ServerSpanMiddleware))
    middleware.append(
        Middleware(
            CORSMiddleware,
            allow_origins=list(settings.allowed_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type"],
            allow_credentials=False,
            max_age=600,
        )
    )
    middleware.append(Middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes))
    app = Starlette(
        debug=settings.debug,
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.services = services
    app.state.schema = schema
    app.state.lifecycle = "starting"
    app.state.close_websockets = view.close_sockets
    return app


def _load(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise RuntimeError(
            f"create_app needs {target} (or pass schema=/services= explicitly): {exc}"
        ) from exc
    return getattr(module, attr)
