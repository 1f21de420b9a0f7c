"""`instances(filter, orderBy, ...)` through the real API over a few thousand instances on
both databases (issue 16, "how it is checked"): each data operator's `totalCount` against
a plain-Python reading of the same rows, every ordering walked forward and backward in
pages (the two walks are mirror images, hold `totalCount` rows in ceil(total / size)
pages), and ascending orders checked against the rows."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from graph_stack import Api

from stateward.persistence.uow import DbTimeouts, UnitOfWorkFactory
from stateward.records import INSTANCE, ProcessRecord
from tests.process_rows import insert_processes

N = 2000
PAGE = 100
T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
MISSING = object()
SEARCH = """query($f:InstanceFilter,$o:InstanceOrder,$first:Int,$after:String,$last:Int,
  $before:String){ instances(filter:$f,orderBy:$o,first:$first,after:$after,last:$last,
  before:$before){ totalCount edges { node { instanceId } }
  pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }"""


def _rows() -> list[ProcessRecord]:
    rng = random.Random(1616)
    rows = []
    for n in range(N):
        created = T0 + timedelta(seconds=n // 3)  # ties: the id breaks them
        data: dict[str, Any] = {
            "amount": rng.randint(0, 500) + (0.5 if n % 7 == 0 else 0),
            "tags": rng.sample(["a", "b", "c"], rng.randint(0, 2)),
        }
        if n % 3:
            data["tier"] = rng.choice(["gold", "silver", "bronze"])
        due = None if n % 4 == 0 else T0 + timedelta(seconds=rng.randint(0, 9000))
        rows.append(
            ProcessRecord(
                id=f"{n:06d}-{rng.randrange(16**8):08x}",
                kind=INSTANCE,
                namespace="acme/sales",
                workflow="acme/sales/deal",
                workflow_version=1,
                data=data,
                state=rng.choice(["new", "review"]),
                status="active",
                seq=0,
                state_entered_at=T0 + timedelta(seconds=rng.randint(0, 9000)),
                last_event_at=created,
                created_at=created,
                updated_at=T0 + timedelta(seconds=rng.randint(0, 9000)),
                started_by="seed",
                sla_due_at=due,
            )
        )
    return rows


ROWS = _rows()


@pytest.fixture
async def seeded(api: Api) -> Api:
    # 1,500 rows in one transaction: allow it 30 s idle (the 1 s production bound ends
    # it when a loaded box deschedules the test between the insert's batches).
    seed = UnitOfWorkFactory(api.runtime.uow.sessions, DbTimeouts(lock_ms=1000, idle_ms=30_000))
    async with seed() as uow:
        await insert_processes(uow.session, ROWS)
        await uow.commit()
    return api


def _at(data: dict[str, Any], key: str) -> Any:
    return data.get(key, MISSING)


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


#: (data condition, what it means in Python)
OPS: list[tuple[dict[str, Any], Any]] = [
    ({"path": "tier", "op": "EQ", "value": "gold"}, lambda d: _at(d, "tier") == "gold"),
    ({"path": "tier", "op": "NE", "value": "gold"}, lambda d: _at(d, "tier") != "gold"),
    ({"path": "amount", "op": "GT", "value": 250}, lambda d: d["amount"] > 250),
    ({"path": "amount", "op": "GTE", "value": 250}, lambda d: d["amount"] >= 250),
    ({"path": "amount", "op": "LT", "value": 100.5}, lambda d: d["amount"] < 100.5),
    ({"path": "amount", "op": "LTE", "value": 100.5}, lambda d: d["amount"] <= 100.5),
    ({"path": "tier", "op": "IN", "value": ["gold", "bronze"]},
     lambda d: _at(d, "tier") in ("gold", "bronze")),
    ({"path": "tags", "op": "CONTAINS", "value": "a"}, lambda d: "a" in d["tags"]),
    ({"path": "tier", "op": "EXISTS", "value": True}, lambda d: "tier" in d),
    ({"path": "tier", "op": "EXISTS", "value": False}, lambda d: "tier" not in d),
]  # fmt: skip


async def _count(api: Api, condition: dict[str, Any]) -> int:
    variables = {"f": {"workflow": "acme/sales/deal", "data": [condition]}, "first": 1}
    return int((await api.ok(SEARCH, variables))["instances"]["totalCount"])


async def test_every_data_operator_counts_what_the_rows_hold(seeded: Api) -> None:
    for condition, means in OPS:
        expected = sum(1 for r in ROWS if means(r.data))
        assert await _count(seeded, condition) == expected, condition


async def _walk(api: Api, order: dict[str, Any], backward: bool) -> tuple[list[str], int, int]:
    ids: list[str] = []
    totals: set[int] = set()
    pages, cursor = 0, None
    while True:
        paging = {"last": PAGE, "before": cursor} if backward else {"first": PAGE, "after": cursor}
        variables = {"f": {"workflow": "acme/sales/deal"}, "o": order, **paging}
        page = (await api.ok(SEARCH, variables))["instances"]
        totals.add(page["totalCount"])
        pages += 1
        found = [e["node"]["instanceId"] for e in page["edges"]]
        ids += found[::-1] if backward else found
        info = page["pageInfo"]
        if not (info["hasPreviousPage"] if backward else info["hasNextPage"]):
            assert len(totals) == 1
            return ids, pages, totals.pop()
        cursor = info["startCursor"] if backward else info["endCursor"]


def _ascending(field: str) -> list[str]:
    """The ids in the ascending order of `field` (nulls / missing last), ties by id."""

    def key(r: ProcessRecord) -> tuple[Any, ...]:
        value: Any = {
            "CREATED": r.created_at, "UPDATED": r.updated_at,
            "STATE_ENTERED": r.state_entered_at, "SLA_DUE": r.sla_due_at,
            "DATA": r.data.get("amount"),
        }[field]  # fmt: skip
        return (value is None, value if value is not None else 0, r.id)

    return [r.id for r in sorted(ROWS, key=key)]


@pytest.mark.parametrize("field", ["CREATED", "UPDATED", "STATE_ENTERED", "SLA_DUE", "DATA"])
async def test_every_ordering_pages_both_ways_as_mirror_images(seeded: Api, field: str) -> None:
    # descending too where NULLs / missing values have to stay last
    for direction in ("ASC", "DESC") if field in ("SLA_DUE", "DATA") else ("ASC",):
        order: dict[str, Any] = {"field": field, "direction": direction}
        if field == "DATA":
            order["path"] = "amount"
        forward, pages, total = await _walk(seeded, order, backward=False)
        backward, back_pages, back_total = await _walk(seeded, order, backward=True)
        assert total == back_total == len(forward) == N
        assert pages == back_pages == math.ceil(N / PAGE)
        assert backward[::-1] == forward, (field, direction)
        assert len(set(forward)) == N
        if direction == "ASC":
            assert forward == _ascending(field), field
