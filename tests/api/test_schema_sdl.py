"""`docs/schema.graphql` is the exported SDL of the served schema and must not drift."""

from __future__ import annotations

from pathlib import Path

from stateward.schema.export import sdl

SDL_FILE = Path(__file__).resolve().parents[2] / "docs" / "schema.graphql"
REGENERATE = "python -m stateward.schema.export > docs/schema.graphql"

QUERIES = [
    "node",
    "viewer",
    "namespaces",
    "registry",
    "workflow",
    "workflows",
    "instance",
    "instances",
    "assignments",
    "myAssignments",
    "events",
    "notifications",
    "publicEntry",
    "verifyProcess",
    "exportPackage",
    "validateWorkflow",
    "checkpoint",
    "checkpoints",
    "eventProof",
    "consistencyProof",
]
MUTATIONS = [
    "authChallenge",
    "authLogin",
    "createApiToken",
    "submitEvent",
    "addWorkflow",
    "updateWorkflow",
    "removeWorkflow",
    "cloneWorkflow",
    "importPackage",
    "addModule",
    "updateModule",
    "grantRole",
    "revokeRole",
    "startInstance",
    "performAction",
    "advance",
    "cancelInstance",
    "claimAssignment",
    "unclaimAssignment",
    "completeAssignment",
    "cancelAssignment",
    "issueEntryToken",
    "startPublic",
    "advancePublic",
]


def test_the_committed_sdl_matches_the_code() -> None:
    assert SDL_FILE.read_text() == sdl(), (
        f"docs/schema.graphql is out of date with the schema code; regenerate it: {REGENERATE}"
    )


def test_every_contract_operation_is_in_the_schema() -> None:
    text = sdl()
    query = text.split("type Query {", 1)[1].split("\n}", 1)[0]
    mutation = text.split("type Mutation {", 1)[1].split("\n}", 1)[0]
    subscription = text.split("type Subscription {", 1)[1].split("\n}", 1)[0]
    for name in QUERIES:
        assert f"  {name}" in query, name
    for name in MUTATIONS:
        assert f"  {name}(" in mutation, name
    for name in ("events(", "instanceUpdated(", "assignmentQueue("):
        assert f"  {name}" in subscription, name


def test_fixed_return_types_are_kept() -> None:
    text = sdl()
    for signature in (
        "): Workflow!", "): Boolean!", "): [Workflow!]!", "): Instance!", "): ActionResult!",
        "): Assignment!", "): String!", "): PublicEntry!", "): PublicView!", "): Registry!",
        "): Challenge!", "): Session!", "): ApiToken!", "): ValidationReport!",
        "): Verification!",
    ):  # fmt: skip
        assert signature in text, signature
