"""`/dashboard`: the live operations page, served from vendored local assets (no CDN).

The page (`static/dashboard/index.html`) and its ES modules (`dashboard.js`, the JS
client `stateward-client.js`, pinned copies of `graphql-ws`, `canonicalize` and
`@dagrejs/dagre` under `vendor/`, listed with their licences in `manifest.json`) need no
build step. It signs in with an API token and talks to `/graphql` like any client. On in
development; in production only with `STATEWARD_DASHBOARD=1`.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from stateward.settings import Settings

DASHBOARD_DIR = Path(__file__).resolve().parent.parent / "static" / "dashboard"
ASSETS_PATH = "/static/dashboard"


async def dashboard_page(request: Request) -> FileResponse:
    """The page itself (never cached, so a new deployment's page is picked up)."""
    return FileResponse(DASHBOARD_DIR / "index.html", headers={"Cache-Control": "no-store"})


def dashboard_routes(settings: Settings) -> list[BaseRoute]:
    """The page and its assets, unless in production without `STATEWARD_DASHBOARD=1`."""
    if settings.production and not settings.dashboard:
        return []
    return [
        Route("/dashboard", dashboard_page, methods=["GET"]),
        Mount(ASSETS_PATH, app=StaticFiles(directory=DASHBOARD_DIR), name="dashboard"),
    ]
