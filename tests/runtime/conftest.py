"""Fixtures of the runtime tests: a real runtime on a fresh SQLite / PostgreSQL database.

`runtime` is opened on the parametrized `db_url` (every test runs on both backends) with a
`ManualClock` and a fresh node key; `operator` is the admin key of the genesis; `admin_rt`
is the runtime after `init` with the operator as system admin.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from stateward.governance.keys import KeyPair, generate_keypair
from stateward.runtime.access.genesis import init
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings


@pytest.fixture
def clock() -> ManualClock:
    """A clock tests move by hand, starting at the real current time."""
    return ManualClock(datetime.now(UTC))


@pytest.fixture
def operator() -> KeyPair:
    """The operator key the genesis makes system admin."""
    return generate_keypair()


@pytest.fixture
async def runtime(db_url: str, clock: ManualClock) -> AsyncIterator[Runtime]:
    """A runtime on the test's fresh database (schema migrated, not initialized)."""
    rt = await Runtime.open(Settings(database_url=db_url), clock=clock, node_key=generate_keypair())
    yield rt
    await rt.close()


@pytest.fixture
async def admin_rt(runtime: Runtime, operator: KeyPair) -> Runtime:
    """The runtime after `init` granted `admin` to `operator`."""
    await init(runtime, operator)
    return runtime
