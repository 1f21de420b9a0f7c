"""Running the npm tools of `clients/typecheck` from the Python suite.

`.ci/run` installs their pinned packages (`npm ci` in clients/typecheck). A test skips
only when node itself is absent on a developer's machine; with `CI=true` it never skips,
and a missing `node_modules` is a failure that says which command to run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

TYPECHECK = Path(__file__).resolve().parents[2] / "clients" / "typecheck"


def require_node_tools() -> None:
    """Skip (no node, outside CI) or fail (packages not installed) before using the tools."""
    if shutil.which("node") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the clients/typecheck checks: node is not installed")
        pytest.skip("node is not installed (the TypeScript/GraphQL-over-HTTP checks need it)")
    if not (TYPECHECK / "node_modules" / ".bin" / "graphql-codegen").exists():
        pytest.fail(
            "clients/typecheck has no node_modules: run `npm ci` in clients/typecheck "
            "(.ci/run does)"
        )


def run_tool(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """Run a command in clients/typecheck and return the finished process."""
    return subprocess.run(
        args,
        cwd=TYPECHECK,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
