"""Read side of the API (issue 16): search latency against table size, event reads.

- search_ms_10k / search_ms_200k: one GraphQL request through the real ASGI app (auth,
  parsing, validation, resolvers, SQL) for the first page of `instances` with a data
  filter, a sort and `totalCount`:
  `instances(filter: {data: [{path: "customer", op: EQ, value: "c42"}]},
  orderBy: {field: CREATED, direction: DESC}, first: 20) { totalCount nodes {...} }`,
  with 10k and then 200k instances in the table (20k/40k with `--quick`). Every customer
  id recurs 50 times whatever the size (a selective filter, as a support agent's search
  is); `ratio` = 200k / 10k, goal under 2. Instances are bulk-inserted rows (the search
  reads rows, how they were written does not matter to it), seeded with `VACUUM ANALYZE`
  on PostgreSQL as autovacuum would. Median of 15 requests after 3 warm-ups.
- events_read_ratio: 1,000 events of one instance, written through the API (`note`
  actions), read (a) over GraphQL as a client pages them (`events(process, first: 100)`,
  10 requests, every field of `Event`) and (b) from a bare Starlette JSON endpoint that
  reads the same rows with one SELECT and returns them; ratio = (b) / (a), goal >= 0.25
  (200 events with `--quick`). Median of 5 rounds.

`--events-only` skips the search part (no seeded instances; the search keys are absent).

Usage: `python bench/reads.py [--quick] [--events-only] [--json] [--database-url URL]`;
the default is a fresh SQLite file; a PostgreSQL URL must name an empty database. `--json`
prints one JSON object last. The load average is printed with the figures (a 2-core box is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import insert, select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from stateward.app import create_app
from stateward.governance.keys import generate_keypair
from stateward.persistence.models import Event, Process, ProcessData
from stateward.persistence.uow import DbTimeouts, UnitOfWorkFactory
from stateward.records import INSTANCE, ProcessRecord
from stateward.runtime.access.genesis import init
from stateward.runtime.access.tokens import create_api_token
from stateward.runtime.container import Services
from stateward.runtime.core.services import Runtime
from stateward.schema.root import create_schema
from stateward.settings import Settings

SEARCH = """{ instances(filter: {data: [{path: "customer", op: EQ, value: "c42"}]},
  orderBy: {field: CREATED, direction: DESC}, first: 20) {
  totalCount nodes { instanceId state { key } data updatedAt } } }"""
EVENTS = """query($p:ID!,$a:String){ events(process:$p, first:100, after:$a) {
  pageInfo { hasNextPage endCursor } nodes { id processId seq action workflow actor signer
  ts nonce input signature hash prevHash recordedAt envelope } } }"""
NOTE = {
    "$version": "2.0",
    "$path": "bench/reads/case",
    "initial": "open",
    "states": {"open": {"label": "Open"}, "done": {"label": "Done", "terminal": True}},
    "actions": {
        "note": {"label": "Note", "from": "open", "mutate": {"$append": {"notes": "input.text"}}}
    },
}
REPEATS_PER_CUSTOMER = 50


def _rows(start: int, count: int, t0: datetime) -> list[dict[str, Any]]:
    rows = []
    for n in range(start, start + count):
        at = t0 + timedelta(seconds=n)
        record = ProcessRecord(
            id=str(uuid.UUID(int=n + 1)), kind=INSTANCE, namespace="bench/reads",
            workflow="bench/reads/case", workflow_version=1, state="open", status="active",
            seq=1, state_entered_at=at, last_event_at=at, created_at=at, updated_at=at,
            data={"customer": f"c{n // REPEATS_PER_CUSTOMER}", "amount": n % 997,
                  "tags": [f"t{n % 13}"], "note": "x" * 40},
        )  # fmt: skip
        rows.append(asdict(record))
    return rows


async def _seed(rt: Runtime, start: int, count: int) -> None:
    factory = UnitOfWorkFactory(rt.uow.sessions, DbTimeouts(120_000, 120_000, 600_000))
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for offset in range(0, count, 5000):
        async with factory() as uow:
            rows = _rows(start + offset, min(5000, count - offset), t0)
            data = [{"process_id": row["id"], "data": row.pop("data")} for row in rows]
            await uow.session.execute(insert(Process.__table__), rows)
            await uow.session.execute(insert(ProcessData.__table__), data)
            await uow.commit()
    engine = rt.uow.sessions.kw["bind"]
    async with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.exec_driver_sql("VACUUM ANALYZE processes, process_data")
        else:
            await conn.exec_driver_sql("ANALYZE")


async def _timed(call: Any, repeats: int, warmups: int = 3) -> float:
    for _ in range(warmups):
        await call()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _raw_events_app(rt: Runtime) -> Starlette:
    table = Event.__table__

    async def read(request: Request) -> JSONResponse:
        pid = request.query_params["process"]
        async with rt.uow(readonly=True) as uow:
            rows = await uow.session.execute(
                select(table).where(table.c.process_id == pid).order_by(table.c.seq).limit(1000)
            )
            items = [{k: _plain(v) for k, v in r._mapping.items()} for r in rows]
        return JSONResponse(items)

    return Starlette(routes=[Route("/events", read)])


async def run(url: str, quick: bool, events_only: bool = False) -> dict[str, Any]:
    settings = Settings(database_url=url)
    rt = await Runtime.open(settings, node_key=generate_keypair())
    admin = generate_keypair()
    await init(rt, admin.public)
    token, _ = await create_api_token(rt, admin.public, label="bench")
    services = Services(settings, runtime=rt)
    app = create_app(settings, schema=create_schema(settings), services=services)
    headers = {"Authorization": f"Bearer {token}"}
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b")
    raw = httpx.AsyncClient(transport=httpx.ASGITransport(app=_raw_events_app(rt)),
                            base_url="http://r")  # fmt: skip

    async def gql(query: str, variables: dict[str, Any] | None = None) -> Any:
        response = await client.post(
            "/graphql", json={"query": query, "variables": variables or {}}, headers=headers
        )
        body = response.json()
        if body.get("errors"):
            raise RuntimeError(body["errors"])
        return body["data"]

    try:
        await gql("mutation($d:JSON!){addWorkflow(definition:$d){path}}", {"d": NOTE})
        small, large = (20_000, 40_000) if quick else (10_000, 200_000)

        async def search() -> None:
            found = await gql(SEARCH)
            assert found["instances"]["totalCount"] == REPEATS_PER_CUSTOMER

        searched: dict[str, Any] = {}
        if not events_only:
            await _seed(rt, 0, small)
            ms_small = await _timed(search, 15)
            await _seed(rt, small, large - small)
            ms_large = await _timed(search, 15)
            searched = {
                "sizes": [small, large],
                "search_ms_10k": round(ms_small, 2),
                "search_ms_200k": round(ms_large, 2),
                "ratio": round(ms_large / ms_small, 2),
            }

        n_events = 200 if quick else 1000
        started = await gql('mutation{startInstance(workflow:"bench/reads/case"){instanceId}}')
        pid = started["startInstance"]["instanceId"]
        act = """mutation($i:ID!,$t:String!){performAction(instance:$i,action:"note",
          input:{text:$t}){duplicate}}"""
        for n in range(n_events - 1):
            await gql(act, {"i": pid, "t": f"n{n}"})

        async def graphql_read() -> None:
            after, total = None, 0
            while True:
                page = (await gql(EVENTS, {"p": pid, "a": after}))["events"]
                total += len(page["nodes"])
                if not page["pageInfo"]["hasNextPage"]:
                    break
                after = page["pageInfo"]["endCursor"]
            assert total == n_events, total

        async def raw_read() -> None:
            rows = (await raw.get("/events", params={"process": pid})).json()
            assert len(rows) == n_events

        graphql_ms = await _timed(graphql_read, 5, warmups=1)
        raw_ms = await _timed(raw_read, 5, warmups=1)
    finally:
        await client.aclose()
        await raw.aclose()
        await lifespan.__aexit__(None, None, None)
        await rt.close()
    return {
        "database": url.split(":", 1)[0],
        **searched,
        "events": n_events,
        "events_graphql_ms": round(graphql_ms, 1),
        "events_raw_ms": round(raw_ms, 1),
        "events_read_ratio": round(raw_ms / graphql_ms, 3),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--events-only", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--database-url")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.database_url or f"sqlite+aiosqlite:///{folder}/reads.db"
        result = asyncio.run(run(url, args.quick, args.events_only))
    for key, value in result.items():
        print(f"{key}: {value}")
    if args.json:
        print(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
