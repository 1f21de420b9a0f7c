"""The real API stack for schema tests: database, runtime, services, app and a client.

`api` (function scope; SQLite and, when configured, PostgreSQL) builds a fresh migrated
database, a `Runtime` with its own node key, the genesis granting `admin` to a fresh
operator key, the real app from `create_app` with the real schema, and an httpx client
over ASGITransport. `tests/api/conftest.py` re-exports the `api` fixture.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette

from stateward.app import create_app
from stateward.governance.keys import KeyPair, generate_keypair
from stateward.observe import tracing
from stateward.runtime.access.genesis import init
from stateward.runtime.access.tokens import create_api_token
from stateward.runtime.container import Services
from stateward.runtime.core.services import Runtime
from stateward.schema.root import create_schema
from stateward.settings import Settings

LOAN: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/loans/loan",
    "$description": "A small loan",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake", "form": {"fields": {"amount": {"type": "number"}}}},
        "review": {"label": "Review", "assign": "analyst", "sla_seconds": 3600},
        "approved": {"label": "Approved", "terminal": True},
        "rejected": {"label": "Rejected", "terminal": True},
    },
    "actions": {
        "submit": {"label": "Submit", "role": "*", "from": "intake", "to": "review",
                   "mutate": {"$set": {"amount": "input.fields.amount"}}},
        "approve": {"label": "Approve", "role": "manager", "from": "review", "to": "approved",
                    "when": "amount < 1000"},
        "reject": {"label": "Reject", "role": "manager", "from": "review", "to": "rejected"},
        "note": {"label": "Note", "role": "analyst,manager", "from": "review",
                 "mutate": {"$append": {"notes": "input.text"}}},
    },
}  # fmt: skip


def loan(path: str = "acme/loans/loan") -> dict[str, Any]:
    """A copy of the loan workflow deployed at `path`."""
    value = copy.deepcopy(LOAN)
    value["$path"] = path
    return value


@dataclass
class Api:
    """One running stack: call it with `await api.gql(query, variables, token=...)`."""

    app: Starlette
    client: httpx.AsyncClient
    runtime: Runtime
    services: Services
    admin: KeyPair
    admin_token: str

    async def gql(
        self, query: str, variables: dict[str, Any] | None = None, *,
        token: str | None = "admin",
    ) -> dict[str, Any]:  # fmt: skip
        """POST a GraphQL operation; `token="admin"` uses the operator's token."""
        headers = {}
        if token == "admin":
            token = self.admin_token
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        response = await self.client.post(
            "/graphql", json={"query": query, "variables": variables or {}}, headers=headers
        )
        body: dict[str, Any] = response.json()
        return body

    async def ok(self, query: str, variables: dict[str, Any] | None = None, **kw: Any) -> Any:
        """`gql` that fails the test on any error and returns `data`."""
        body = await self.gql(query, variables, **kw)
        assert not body.get("errors"), body.get("errors")
        return body["data"]

    async def user(self, namespace: str | None = None, *roles: str) -> tuple[KeyPair, str]:
        """A new actor with `roles` in `namespace` and an API token for it."""
        key = generate_keypair()
        if namespace and roles:
            await self.ok(
                "mutation($n:String!,$a:String!,$r:[String!]!){grantRole(namespace:$n,"
                "actor:$a,roles:$r){namespace}}",
                {"n": namespace, "a": key.public, "r": list(roles)},
            )
        token, _ = await create_api_token(self.runtime, key.public, label="test")
        return key, token


async def open_stack(db_url: str, **settings: Any) -> tuple[Api, Any]:
    """Open a stack on `db_url`; returns it and an async closer."""
    conf = Settings(database_url=db_url, **settings)
    runtime = await Runtime.open(conf, node_key=generate_keypair())
    admin = generate_keypair()
    await init(runtime, admin)
    token, _ = await create_api_token(runtime, admin.public, label="admin")
    services = Services(conf, runtime=runtime, relay_options={"sweep_interval": 0.2})
    app = create_app(conf, schema=create_schema(conf), services=services)
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
    stack = Api(app, client, runtime, services, admin, token)

    async def close() -> None:
        await client.aclose()
        await lifespan.__aexit__(None, None, None)
        await runtime.close()

    return stack, close


@asynccontextmanager
async def running_stack(db_url: str, **settings: Any) -> AsyncIterator[Api]:
    """`open_stack` as a context: the stack, closed on the way out."""
    stack, close = await open_stack(db_url, **settings)
    try:
        yield stack
    finally:
        await close()


@pytest.fixture
async def api(db_url: str) -> AsyncIterator[Api]:
    """A running stack on a fresh database (SQLite, and PostgreSQL when configured)."""
    async with running_stack(db_url) as stack:
        yield stack


@contextmanager
def recorded_spans(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    """`provider` installed as stateward's tracer provider, every span it records kept in
    memory; uninstalled and shut down afterwards."""
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracing.install(provider)
    try:
        yield memory
    finally:
        tracing.install(None)
        provider.shutdown()
