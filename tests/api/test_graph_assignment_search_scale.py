"""`assignments(filter, orderBy, ...)` through the real API over a few thousand tasks on
both databases (issue 16, "how it is checked", assignments "get the same treatment"):
each filter's `totalCount` against a plain-Python reading of the same rows, and every
ordering walked forward and backward in pages: the two walks are mirror images, hold
`totalCount` rows in ceil(total / size) pages, and follow the sort key."""

from __future__ import annotations

import math
import random
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from graph_stack import Api
from sqlalchemy import insert

from stateward.persistence.models_ops import Assignment, AssignmentCandidate
from stateward.persistence.uow import DbTimeouts, UnitOfWorkFactory
from stateward.records import INSTANCE, AssignmentRecord, ProcessRecord
from tests.process_rows import insert_processes

N = 1500
PAGE = 100
T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
TEAMS = ("analyst", "clerk", "manager")
PEOPLE = ("ana", "bo", "cy")
STATUSES = ("unassigned", "claimed", "completed", "cancelled")
SEARCH = """query($f:AssignmentFilter,$o:AssignmentOrder,$first:Int,$after:String,$last:Int,
  $before:String){ assignments(filter:$f,orderBy:$o,first:$first,after:$after,last:$last,
  before:$before){ totalCount edges { node { assignmentId priority dueAt createdAt } }
  pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }"""


def _world() -> tuple[list[ProcessRecord], list[AssignmentRecord], dict[str, str]]:
    rng = random.Random(1617)
    processes, tasks, namespace_of = [], [], {}
    for n in range(N):
        namespace = "globex/ops" if n % 5 == 0 else "acme/ops"
        pid = f"{n:06d}-{rng.randrange(16**8):08x}"
        created = T0 + timedelta(seconds=n // 3)  # ties: the id breaks them
        processes.append(
            ProcessRecord(
                id=pid, kind=INSTANCE, namespace=namespace, workflow=f"{namespace}/task",
                workflow_version=1, data={}, state="review", status="active", seq=1,
                state_entered_at=created, last_event_at=created, created_at=created,
                updated_at=created, started_by="seed",
            )
        )  # fmt: skip
        status = rng.choice(STATUSES)
        tasks.append(
            AssignmentRecord(
                id=f"t{n:06d}-{rng.randrange(16**8):08x}", process_id=pid, state="review",
                team=rng.choice(TEAMS), status=status, entered_seq=1, created_at=created,
                assignee=rng.choice(PEOPLE) if status != "unassigned" else None,
                priority=None if n % 6 == 0 else rng.randint(0, 100),
                due_at=None if n % 4 == 0 else T0 + timedelta(seconds=rng.randint(0, 9000)),
                candidate_users=rng.sample(PEOPLE, rng.randint(0, 2)) or None,
            )
        )  # fmt: skip
        namespace_of[tasks[-1].id] = namespace
    return processes, tasks, namespace_of


PROCESSES, TASKS, NAMESPACE_OF = _world()


@pytest.fixture
async def seeded(api: Api) -> Api:
    # 1,500 processes and their tasks in one transaction: allow it 30 s idle (the 1 s
    # production bound ends it when a loaded box deschedules the test between the
    # inserts' batches, as `test_graph_search_scale.py`'s seed).
    seed = UnitOfWorkFactory(api.runtime.uow.sessions, DbTimeouts(lock_ms=1000, idle_ms=30_000))
    async with seed() as uow:
        await insert_processes(uow.session, PROCESSES)
        await uow.session.execute(insert(Assignment.__table__), [asdict(t) for t in TASKS])
        candidates = [
            {"assignment_id": t.id, "candidate": c} for t in TASKS for c in t.candidate_users or ()
        ]
        await uow.session.execute(insert(AssignmentCandidate.__table__), candidates)
        await uow.commit()
    return api


#: (filter, what it means in Python)
FILTERS: list[tuple[dict[str, Any], Any]] = [
    ({}, lambda t: True),
    ({"status": ["UNASSIGNED"]}, lambda t: t.status == "unassigned"),
    ({"status": ["CLAIMED", "COMPLETED"]}, lambda t: t.status in ("claimed", "completed")),
    ({"team": "clerk"}, lambda t: t.team == "clerk"),
    ({"assignee": "bo"}, lambda t: t.assignee == "bo"),
    ({"candidate": "cy"}, lambda t: "cy" in (t.candidate_users or ())),
    ({"priority": 50}, lambda t: t.priority is not None and t.priority >= 50),
    ({"dueBefore": (T0 + timedelta(seconds=3000)).isoformat()},
     lambda t: t.due_at is not None and t.due_at < T0 + timedelta(seconds=3000)),
    ({"namespace": "globex/ops"}, lambda t: NAMESPACE_OF[t.id] == "globex/ops"),
    ({"team": "analyst", "status": ["UNASSIGNED"], "priority": 20},
     lambda t: t.team == "analyst" and t.status == "unassigned"
     and t.priority is not None and t.priority >= 20),
]  # fmt: skip


async def test_every_filter_counts_what_the_rows_hold(seeded: Api) -> None:
    for condition, means in FILTERS:
        expected = sum(1 for t in TASKS if means(t))
        page = (await seeded.ok(SEARCH, {"f": condition, "first": 1}))["assignments"]
        assert page["totalCount"] == expected, condition


async def _walk(api: Api, order: dict[str, Any], backward: bool) -> tuple[list[Any], int, int]:
    nodes: list[Any] = []
    totals: set[int] = set()
    pages, cursor = 0, None
    while True:
        paging = {"last": PAGE, "before": cursor} if backward else {"first": PAGE, "after": cursor}
        page = (await api.ok(SEARCH, {"o": order, **paging}))["assignments"]
        totals.add(page["totalCount"])
        pages += 1
        found = [e["node"] for e in page["edges"]]
        nodes += found[::-1] if backward else found
        info = page["pageInfo"]
        if not (info["hasPreviousPage"] if backward else info["hasNextPage"]):
            assert len(totals) == 1
            return nodes, pages, totals.pop()
        cursor = info["startCursor"] if backward else info["endCursor"]


def _follows_its_key(values: list[Any], direction: str) -> bool:
    """Non-null values in the order's direction, all nulls together at one end."""
    present = [v for v in values if v is not None]
    nulls = [i for i, v in enumerate(values) if v is None]
    grouped = not nulls or nulls == list(range(nulls[0], nulls[0] + len(nulls)))
    at_an_end = not nulls or nulls[0] == 0 or nulls[-1] == len(values) - 1
    return grouped and at_an_end and present == sorted(present, reverse=direction == "DESC")


@pytest.mark.parametrize("field", ["CREATED", "DUE", "PRIORITY"])
@pytest.mark.parametrize("direction", ["ASC", "DESC"])
async def test_every_ordering_pages_both_ways_as_mirror_images(
    seeded: Api, field: str, direction: str
) -> None:
    order = {"field": field, "direction": direction}
    forward, pages, total = await _walk(seeded, order, backward=False)
    backward, back_pages, back_total = await _walk(seeded, order, backward=True)
    ids = [n["assignmentId"] for n in forward]
    assert total == back_total == len(forward) == N
    assert pages == back_pages == math.ceil(N / PAGE)
    assert [n["assignmentId"] for n in backward][::-1] == ids, (field, direction)
    assert len(set(ids)) == N
    key = {"CREATED": "createdAt", "DUE": "dueAt", "PRIORITY": "priority"}[field]
    values = [n[key] for n in forward]
    if key != "priority":
        values = [None if v is None else datetime.fromisoformat(v) for v in values]
    assert _follows_its_key(values, direction), (field, direction)
