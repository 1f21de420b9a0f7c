"""`stateward serve --demo`: the example workflows, a few live instances and a ready token.

Everything goes through signed events, signed by the operator key of the deployment (the
key file `serve` created with the genesis, see `container.operator_key_path`): the
Starlark modules (`*.star`) and workflows (`*.json`) of `examples/` are added or updated
in their namespace registries, the operator is granted the teams the examples use, and a
few instances are started and moved. Running it again changes nothing that is already
there (same definitions and modules are skipped, instances have fixed ids); only a new
API token is issued each time.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stateward.domain.definition import load_definition
from stateward.domain.errors import DomainError
from stateward.governance.keys import KeyPair, read_key_file
from stateward.runtime.access import references, registry, tokens
from stateward.runtime.core import commands, queries
from stateward.runtime.core.services import Runtime

EXAMPLES_ENV = "STATEWARD_EXAMPLES_DIR"
TEAMS = (
    "analyst", "manager", "compliance", "support", "support-l2", "sales", "office", "agent",
    "requester", "approver", "finance", "hr", "onboarding",
)  # fmt: skip
DEMO_LABEL = "demo"


@dataclass
class DemoResult:
    """What the demo loaded, and the token to try it with."""

    token: str
    actor: str
    deployed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)


def find_examples(start: Path | None = None) -> Path:
    """The `examples/` folder: `$STATEWARD_EXAMPLES_DIR`, else `./examples` (the current
    directory or a parent), else the one beside the installed package (a source checkout).

    Raises FileNotFoundError with the places looked at when none exists.
    """
    import os

    candidates: list[Path] = []
    if os.environ.get(EXAMPLES_ENV):
        candidates.append(Path(os.environ[EXAMPLES_ENV]))
    here = (start or Path.cwd()).resolve()
    candidates.extend(p / "examples" for p in (here, *here.parents))
    candidates.append(Path(__file__).resolve().parents[2] / "examples")
    for path in candidates:
        if path.is_dir() and any(path.rglob("*.json")):
            return path
    raise FileNotFoundError(
        "no examples/ folder found (set STATEWARD_EXAMPLES_DIR); looked in "
        + ", ".join(str(p) for p in candidates[:3])
    )


def _modules(root: Path) -> list[tuple[str, str, str]]:
    """(namespace, name, source) of every `*.star` file (namespace = its folder)."""
    return [
        (f.parent.relative_to(root).as_posix(), f.stem, f.read_text("utf-8"))
        for f in sorted(root.rglob("*.star"))
    ]


def _workflows(root: Path) -> list[dict[str, Any]]:
    return [json.loads(f.read_text("utf-8")) for f in sorted(root.rglob("*.json"))]


async def load_demo(runtime: Runtime, operator: KeyPair, examples: Path) -> DemoResult:
    """Deploy `examples` as `operator`, start the demo instances, issue a token."""
    result = DemoResult(token="", actor=operator.public)
    if not await runtime.node_trusted():
        await registry.trust_node(runtime, operator, runtime.node_public)
    namespaces = await _deploy_modules(runtime, operator, examples, result)
    await _deploy_workflows(runtime, operator, _workflows(examples), result)
    namespaces.update(p.rsplit("/", 1)[0] for p in result.deployed + result.unchanged)
    await _grant_teams(runtime, operator, sorted(namespaces))
    result.instances = await _instances(runtime, operator.public)
    result.token, _ = await tokens.create_api_token(runtime, operator.public, label=DEMO_LABEL)
    return result


async def load_demo_from_file(runtime: Runtime, key_file: Path) -> DemoResult:
    """`load_demo` with the operator key read from `key_file` and the examples found."""
    return await load_demo(runtime, read_key_file(key_file), find_examples())


async def _deploy_modules(
    runtime: Runtime, operator: KeyPair, root: Path, result: DemoResult
) -> set[str]:
    namespaces = set()
    for namespace, name, source in _modules(root):
        namespaces.add(namespace)
        async with runtime.uow(readonly=True) as uow:
            current = await uow.modules.get(namespace, name)
        if current is None:
            await registry.add_module(runtime, operator, namespace, name, source)
        elif current.source != source:
            await registry.update_module(runtime, operator, namespace, name, source)
        else:
            continue
        result.modules.append(f"{namespace}/{name}")
    return namespaces


async def _deploy_workflows(
    runtime: Runtime, operator: KeyPair, sources: Iterable[dict[str, Any]], result: DemoResult
) -> None:
    """Add or update each workflow; one that names a workflow not deployed yet (spawn
    target, hook) is retried after the others, until no progress is made."""
    pending = list(sources)
    while pending:
        failed: list[tuple[dict[str, Any], DomainError]] = []
        for source in pending:
            try:
                await _deploy_one(runtime, operator, source, result)
            except DomainError as error:
                failed.append((source, error))
        if len(failed) == len(pending):
            raise failed[0][1]
        pending = [s for s, _ in failed]


async def _deploy_one(
    runtime: Runtime, operator: KeyPair, source: dict[str, Any], result: DemoResult
) -> None:
    path = str(source["$path"])
    current = await registry.get_workflow(runtime, path)
    if current is None or current.definition.hash != load_definition(source).hash:
        await references.grant_references(runtime, operator, source)  # cross-namespace
    if current is None:
        async with runtime.uow(readonly=True) as uow:
            known = await uow.workflows.get(path)
        if known is None:
            await registry.deploy_workflow(runtime, operator, source)
        else:  # removed earlier: a new version brings it back
            await registry.update_workflow(runtime, operator, source)
    elif current.definition.hash != load_definition(source).hash:
        await registry.update_workflow(runtime, operator, source)
    else:
        result.unchanged.append(path)
        return
    result.deployed.append(path)


async def _grant_teams(runtime: Runtime, operator: KeyPair, namespaces: list[str]) -> None:
    """Give the operator every team role of the examples, in each example namespace."""
    for namespace in namespaces:
        held = await registry.roles_of(runtime, operator.public, namespace)
        missing = [t for t in TEAMS if t not in held]
        if missing:
            await registry.grant_role(runtime, operator, namespace, operator.public, missing)


#: (workflow, start data, actions performed after the start as (name, input)).
SCENARIOS: tuple[tuple[str, Mapping[str, Any], tuple[tuple[str, Mapping[str, Any]], ...]], ...] = (
    ("customer/retail/retail-customer", {"source": "demo"}, (("add_note", {"note": "called"}),)),
    ("customer/retail/retail-customer", {"source": "demo"}, ()),
    (
        "support/desk/ticket",
        {},
        (
            (
                "open",
                {
                    "fields": {
                        "subject": "Cannot log in",
                        "description": "The login page shows an error since this morning.",
                        "priority": "normal",
                        "customer_email": "ada@example.com",
                    }
                },
            ),
        ),
    ),
    (
        "intake/public/contact-form",
        {},
        (
            (
                "send",
                {
                    "fields": {
                        "name": "Grace",
                        "email": "grace@example.com",
                        "topic": "sales",
                        "message": "Please send me a quote for 20 seats.",
                        "consent": True,
                    }
                },
            ),
        ),
    ),
)


SCENARIOS += (
    (
        "procure/purchasing/purchase-approval",
        {},
        (("submit", {"fields": {"item": "Standing desk", "amount": 640, "reason": "Back pain"}}),),
    ),
    (
        "people/onboarding/onboarding",
        {"teams": ["hr", "it", "facilities"]},
        (("begin", {"fields": {"employee": "Eve Example", "start_date": "2027-01-04"}}),),
    ),
    ("intake/public/service-request", {}, ()),
)


async def _instances(runtime: Runtime, actor: str) -> list[str]:
    """Start the demo instances (fixed ids per deployment) and move them a little."""
    ids = []
    for index, (workflow, data, actions) in enumerate(SCENARIOS):
        pid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"stateward-demo:{runtime.net}:{index}"))
        ids.append(pid)
        if await queries.get_process(runtime, pid) is not None:
            continue
        await commands.start_instance(runtime, actor, workflow, data, id=pid)
        for name, input in actions:
            await commands.perform_action(runtime, actor, pid, name, input)
    return ids


def describe(result: DemoResult, url: str) -> str:
    """The text `serve --demo` prints: the token, a curl query and the GraphiQL URL."""
    query = json.dumps({"query": "{ workflows { edges { node { path version } } } }"})
    return "\n".join(
        [
            f"demo: {len(result.deployed)} workflow(s) deployed, "
            f"{len(result.unchanged)} unchanged, {len(result.modules)} module(s), "
            f"{len(result.instances)} demo instance(s)",
            f"demo token (admin {result.actor}):",
            f"  {result.token}",
            "try:",
            f"  curl -s {url} -H 'Authorization: Bearer {result.token}' \\",
            f"       -H 'Content-Type: application/json' -d '{query}'",
            f"GraphiQL: {url} (send the header Authorization: Bearer <token>)",
        ]
    )
