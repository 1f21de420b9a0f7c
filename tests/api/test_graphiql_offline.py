"""GraphiQL is served from vendored assets only (no CDN), in development only."""

from __future__ import annotations

import base64
import hashlib
import re

import httpx
from api_app import make_app

from stateward.http.graphiql import asset_manifest

HTML = {"Accept": "text/html"}
ATTR = re.compile(r"""\b(src|href)\s*=\s*"([^"]*)\"""")
SCRIPT_OR_LINK = re.compile(r"<(script|link)\b[^>]*>", re.S)


async def test_graphiql_page_references_no_external_host(client: httpx.AsyncClient):
    response = await client.get("/graphql", headers=HTML)
    assert response.status_code == 200
    assert "text/html" in response.headers["content-type"]
    refs = [v for _, v in ATTR.findall(response.text)]
    assert refs, "the page loads assets"
    external = [r for r in refs if not (r.startswith("/") or r.startswith("data:"))]
    assert external == []
    assert "unpkg.com" not in response.text and "jsdelivr" not in response.text


async def test_every_referenced_asset_is_served_and_matches_its_integrity_hash(
    client: httpx.AsyncClient,
):
    html = (await client.get("/graphql", headers=HTML)).text
    tags = SCRIPT_OR_LINK.findall(html)
    assert {"script", "link"} <= set(tags)
    checked = 0
    for tag in re.findall(r"<(?:script|link)\b[^>]*>", html, re.S):
        match = re.search(r'(?:src|href)="(/static/graphiql/[^"]+)"', tag)
        if not match:
            continue
        response = await client.get(match.group(1))
        assert response.status_code == 200, match.group(1)
        integrity = re.search(r'integrity="(sha384-[^"]+)"', tag)
        assert integrity, f"{match.group(1)} keeps its SRI hash"
        digest = base64.b64encode(hashlib.sha384(response.content).digest()).decode()
        assert integrity.group(1) == f"sha384-{digest}"
        checked += 1
    assert checked == len(asset_manifest()) == 7


async def test_graphiql_and_its_assets_are_off_in_production():
    app = make_app(mode="production")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        page = await c.get("/graphql", headers=HTML)
        asset = await c.get("/static/graphiql/graphiql.min.js")
    assert page.status_code == 404
    assert asset.status_code == 404
