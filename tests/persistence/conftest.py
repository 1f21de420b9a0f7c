"""Fixtures of the persistence tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from stateward.persistence import create_engine


@pytest.fixture
async def sqlite_engine(sqlite_db_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on a fresh SQLite file, as `create_engine` makes it (disposed after)."""
    eng = create_engine(sqlite_db_url)
    yield eng
    await eng.dispose()
