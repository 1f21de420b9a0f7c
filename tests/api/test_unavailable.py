"""A database that drops connections under the API (PostgreSQL, `pg_terminate_backend` as an
operator or a failover does it): requests are retried on the server, and what still fails
is answered `UNAVAILABLE` (try again), never `INTERNAL_ERROR` (the CI soak saw one, issue 11).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from graph_stack import Api, running_stack
from sqlalchemy.engine import make_url
from test_graph_visitor import DEPLOY, MIXED, SEE, START

pytestmark = pytest.mark.postgres

READS = "query{instances(first:5){edges{node{id}}}}"
VIEWER = "query{viewer{id}}"


@pytest.fixture
async def pg_api(postgres_db_url: str) -> AsyncIterator[Api]:
    async with running_stack(postgres_db_url, public_rate_limit=1_000_000) as stack:
        yield stack


async def test_dropped_connections_are_retried_or_answered_unavailable(
    pg_api: Api, postgres_db_url: str
) -> None:
    api = pg_api
    await api.ok(DEPLOY, {"d": MIXED})
    visitors = [
        (await api.gql(START, {"d": {"name": f"v{i}"}}, token=None))["data"]["startPublic"]["token"]
        for i in range(4)
    ]
    tokens = [(await api.user())[1] for _ in range(16)]  # each checked once: uncached
    url = make_url(postgres_db_url)
    killer_db = await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, database=url.database
    )
    stop = asyncio.Event()
    killed = 0

    async def killer() -> None:
        nonlocal killed
        while not stop.is_set():
            killed += await killer_db.fetchval(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            await asyncio.sleep(0.01)

    codes: Counter[str] = Counter()

    async def client(n: int) -> None:
        for i in range(30):
            query: tuple[str, dict[str, Any], str | None] = [
                (SEE, {"t": visitors[(n + i) % 4]}, None),
                (READS, {}, "admin"),
                (VIEWER, {}, tokens[(n * 30 + i) % 16]),
            ][i % 3]
            body = await api.gql(query[0], query[1], token=query[2])
            for error in body.get("errors") or []:
                codes[(error.get("extensions") or {}).get("code")] += 1

    killing = asyncio.create_task(killer())
    try:
        await asyncio.gather(*(client(n) for n in range(6)))
    finally:
        stop.set()
        await killing
        await killer_db.close()
    assert killed > 0  # the faults really happened
    assert set(codes) <= {"UNAVAILABLE"}, codes
    # and the stack is whole again once the faults stop
    assert (await api.ok(SEE, {"t": visitors[0]}))["publicEntry"]["active"] is True
