"""GraphiQL that works offline: Strawberry's page, pointed at our vendored npm assets.

Strawberry's template loads react, react-dom, js-cookie, graphiql and the explorer plugin
from unpkg. `static/graphiql/manifest.json` maps each of those URLs to a byte-identical
local copy (so the SRI `integrity` attributes stay valid). A template that still points at
any external host after rewriting is refused loudly: that means Strawberry changed its
page and the vendored assets must be refreshed (see static/graphiql/README.md).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from strawberry.http.ides import get_graphql_ide_html

STATIC_DIR = Path(__file__).resolve().parent.parent / "static" / "graphiql"
STATIC_PATH = "/static/graphiql"
_EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", re.IGNORECASE)


class StaleGraphiQLAssets(RuntimeError):
    """The GraphiQL template references an asset that is not vendored."""


@cache
def asset_manifest() -> tuple[dict[str, str], ...]:
    """The vendored assets: `{url, file, package, version, integrity}` per CDN reference."""
    data = json.loads((STATIC_DIR / "manifest.json").read_text(encoding="utf-8"))
    return tuple(data["assets"])


@cache
def offline_graphiql_html(root_path: str = "") -> str:
    """Strawberry's GraphiQL page with every CDN URL replaced by `{root_path}/static/graphiql/..`.

    Raises StaleGraphiQLAssets if an external `src`/`href` remains after rewriting.
    """
    html = get_graphql_ide_html("graphiql")
    prefix = root_path.rstrip("/") + STATIC_PATH
    for asset in asset_manifest():
        html = html.replace(asset["url"], f"{prefix}/{asset['file']}")
    leftover = _EXTERNAL.search(html)
    if leftover:
        start = leftover.start()
        raise StaleGraphiQLAssets(
            "GraphiQL template references an asset that is not vendored: "
            f"{html[start : start + 120]!r}; refresh stateward/static/graphiql"
        )
    return html
