"""`/dashboard` is served from vendored, pinned assets that match their manifest, with no
external host, on in development and off in production unless STATEWARD_DASHBOARD=1."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import httpx

from stateward.app import create_app
from stateward.http.dashboard import DASHBOARD_DIR
from stateward.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = json.loads((DASHBOARD_DIR / "manifest.json").read_text(encoding="utf-8"))
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["'](?:https?:)?//|from\s+["']https?://""")


def test_every_vendored_file_matches_its_manifest_hash_and_has_a_licence() -> None:
    for package in MANIFEST["packages"]:
        files = package["files"]
        assert any("LICENSE" in f["file"] for f in files), package["package"]
        for entry in files:
            data = (DASHBOARD_DIR / entry["file"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["file"]


def test_the_page_loads_the_js_client_itself_and_the_same_pinned_packages() -> None:
    (copy,) = MANIFEST["copies"]
    assert (DASHBOARD_DIR / copy["file"]).read_bytes() == (ROOT / copy["source"]).read_bytes()
    lock = json.loads((ROOT / "clients" / "js" / "package-lock.json").read_text())
    locked = {k.removeprefix("node_modules/"): v["version"] for k, v in lock["packages"].items()}
    for package in MANIFEST["packages"]:
        if package["package"] in ("graphql-ws", "canonicalize"):
            assert locked[package["package"]] == package["version"]


def test_no_asset_is_loaded_from_another_host() -> None:
    for path in DASHBOARD_DIR.glob("*.*"):
        if path.suffix in (".html", ".js", ".css"):
            assert not EXTERNAL.search(path.read_text(encoding="utf-8")), path.name


async def _get(settings: Settings, path: str) -> httpx.Response:
    app = create_app(settings, services=object())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.get(path)


async def test_served_in_development_with_its_modules() -> None:
    page = await _get(Settings(), "/dashboard")
    assert page.status_code == 200 and "stateward operations" in page.text
    module = await _get(Settings(), "/static/dashboard/vendor/graphql-ws/client.js")
    assert module.status_code == 200 and "createClient" in module.text
    assert "javascript" in module.headers["content-type"]


async def test_off_in_production_unless_enabled() -> None:
    production = Settings(mode="production")
    assert (await _get(production, "/dashboard")).status_code == 404
    enabled = Settings(mode="production", dashboard=True)
    assert (await _get(enabled, "/dashboard")).status_code == 200
