"""The GraphQL-over-HTTP spec's own audit suite (npm `graphql-http`) against a real server.

`clients/typecheck/audit.mjs` runs `auditServer` (every MUST and SHOULD of the spec,
including the `application/graphql-response+json` media type: 400 and no `data` when a
request fails before execution) against a `stateward serve` process and prints the
results as JSON; every audit must pass with no warning (issue 16).
"""

from __future__ import annotations

import json

import pytest
from e2e.harness import ServerProcess
from typecheck_tools import require_node_tools, run_tool

pytestmark = pytest.mark.slow


def test_graphql_http_audit_passes_with_no_warning(server: ServerProcess) -> None:
    require_node_tools()
    done = run_tool(["node", "audit.mjs"], env={"STATEWARD_URL": server.url}, timeout=120)
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-4000:]
    summary = json.loads(lines[-1])
    failing = [r for r in summary["results"] if r["status"] != "ok"]
    assert not failing, json.dumps(failing, indent=1)[:6000]
    assert summary["ok"] >= 50 and done.returncode == 0
