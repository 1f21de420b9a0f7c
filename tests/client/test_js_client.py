"""The JavaScript client (`clients/js`) under `node --test` against a real server.

`.ci/run` installs its pinned npm packages (`npm ci`); outside CI the test skips with a
reason when node or those packages are missing. With `CI=true` it never skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from e2e.harness import ServerProcess

pytestmark = pytest.mark.slow

JS = Path(__file__).resolve().parents[2] / "clients" / "js"


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (JS / "node_modules" / "graphql-ws").is_dir():
        return "clients/js has no node_modules (run `npm ci` in clients/js)"
    return None


def test_the_js_client_passes_its_node_tests_against_a_real_server(
    server: ServerProcess, tmp_path: Path
) -> None:
    missing = _missing()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the JS client tests: {missing}")
        pytest.skip(missing)
    env = {
        **os.environ,
        "STATEWARD_URL": server.url,
        "STATEWARD_KEY_FILE": str(tmp_path / "operator.json"),
    }
    done = subprocess.run(
        ["node", "--test", "test/"],
        cwd=JS,
        env=env,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# skipped 0" in done.stdout and "# fail 0" in done.stdout
