"""A frontend's view of the schema: GraphQL Code Generator + `tsc --strict` (issue 16).

Code Generator (typescript, typescript-operations, typed-document-node; pinned in
clients/typecheck/package.json) turns docs/schema.graphql and the operations a frontend
sends (clients/typecheck/operations: instance search with paging and totals, an instance
with its workflow graph, assignments and their counts, a live-events subscription) into
TypeScript; `tsc --strict` then checks that code with clients/typecheck/src/usage.ts,
whose `@ts-expect-error` lines are mistakes the generated types must catch. An operation
that no longer validates against the schema fails the codegen step.
"""

from __future__ import annotations

import pytest
from typecheck_tools import TYPECHECK, require_node_tools, run_tool

pytestmark = pytest.mark.slow


def test_generated_typescript_types_compile_under_tsc_strict() -> None:
    require_node_tools()
    generated = run_tool(["node_modules/.bin/graphql-codegen", "--config", "codegen.yml"])
    assert generated.returncode == 0, generated.stdout[-4000:] + generated.stderr[-4000:]
    output = (TYPECHECK / "generated" / "graphql.ts").read_text()
    for name in (
        "InstanceSearchDocument",
        "InstanceDetailDocument",
        "MyAssignmentsDocument",
        "LiveEventsDocument",
    ):
        assert f"export const {name}" in output, name
    checked = run_tool(["node_modules/.bin/tsc", "-p", "tsconfig.json"])
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-2000:]
