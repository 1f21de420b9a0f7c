"""The documentation site at `/docs`, in development only, and only when it has been built.

`make docs` builds the MkDocs site into `site/` at the repository root. A development
server mounts it at `/docs` so the reference and tutorials sit next to GraphiQL. Where the
built site is looked for, first match wins: `settings.extra["docs_site"]`, `./site` in the
current directory, `site/` beside the package of a source checkout. A folder without an
`index.html` is not a built site. Production never serves it.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from stateward.settings import Settings

DOCS_PATH = "/docs"
_CHECKOUT_SITE = Path(__file__).resolve().parents[2] / "site"


def built_site(settings: Settings) -> Path | None:
    """The folder of the built documentation site, or None when there is none."""
    explicit = (settings.extra or {}).get("docs_site")
    candidates = [Path(str(explicit))] if explicit else [Path("site"), _CHECKOUT_SITE]
    for folder in candidates:
        if (folder / "index.html").is_file():
            return folder.resolve()
    return None


async def _to_index(request: Request) -> RedirectResponse:
    """`/docs` -> `/docs/`, so the pages' relative links resolve under `/docs/`."""
    return RedirectResponse(url=f"{DOCS_PATH}/", status_code=308)


def docs_routes(settings: Settings) -> list[BaseRoute]:
    """The routes serving the built site (none in production or when it is not built)."""
    site = None if settings.production else built_site(settings)
    if site is None:
        return []
    return [
        Route(DOCS_PATH, _to_index, methods=["GET", "HEAD"]),
        Mount(DOCS_PATH, app=StaticFiles(directory=site, html=True), name="docs"),
    ]
