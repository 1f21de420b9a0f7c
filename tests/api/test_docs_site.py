"""The built documentation site is served at /docs in development, and only then."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from api_app import make_app


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "reference").mkdir()
    (tmp_path / "index.html").write_text("<h1>stateward docs</h1>", "utf-8")
    (tmp_path / "reference" / "errors.html").write_text("<h1>Error codes</h1>", "utf-8")
    return tmp_path


async def get(app: object, *paths: str) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        return [await c.get(path) for path in paths]


async def test_a_built_site_is_served_at_docs_in_development(site: Path) -> None:
    app = make_app(extra={"docs_site": str(site)})
    root, index, page = await get(app, "/docs", "/docs/", "/docs/reference/errors.html")
    assert root.status_code == 308 and root.headers["location"].endswith("/docs/")
    assert index.status_code == 200 and "stateward docs" in index.text
    assert page.status_code == 200 and "Error codes" in page.text


async def test_no_docs_in_production(site: Path) -> None:
    app = make_app(mode="production", extra={"docs_site": str(site)})
    (index,) = await get(app, "/docs/")
    assert index.status_code == 404


async def test_no_docs_route_when_the_site_is_not_built(tmp_path: Path) -> None:
    app = make_app(extra={"docs_site": str(tmp_path)})  # no index.html: not built
    root, index = await get(app, "/docs", "/docs/")
    assert root.status_code == 404 and index.status_code == 404
