"""Bulk rows of processes for tests that seed thousands at once (`ProcessRepository.add`
writes one at a time): each record's `processes` row and its `process_data` row."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from sqlalchemy import insert

from stateward.persistence.models import Process, ProcessData
from stateward.records import ProcessRecord


async def insert_processes(session: Any, records: Iterable[ProcessRecord]) -> None:
    """Insert `records` in two executemany statements (the caller commits)."""
    rows = [asdict(r) for r in records]
    data = [{"process_id": row["id"], "data": row.pop("data")} for row in rows]
    await session.execute(insert(Process.__table__), rows)
    await session.execute(insert(ProcessData.__table__), data)
