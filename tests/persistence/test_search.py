"""Instance search in SQL on both databases: every data operator and every ordering over a
few thousand instances, checked against a plain-Python reading of the same rows."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from persistence_factories import at, new_process
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ClauseElement, Executable

from stateward.domain.errors import DomainError
from stateward.domain.search import (
    INSTANCE_ORDERS,
    DataCondition,
    InstanceSearch,
    Ordering,
)
from stateward.persistence import UnitOfWorkFactory
from stateward.persistence.db import create_engine
from stateward.persistence.uow import DbTimeouts
from stateward.records import ProcessRecord
from tests.process_rows import insert_processes

N = 3000
MISSING = object()


def _data(rng: random.Random, n: int) -> dict[str, Any]:
    data: dict[str, Any] = {
        "amount": rng.randint(0, 1000) if n % 7 else rng.randint(0, 1000) + 0.5,
        "tags": rng.sample(["a", "b", "c", "d"], rng.randint(0, 3)),
        "customer": {"name": f"c{n % 50}", "vip": n % 4 == 0},
        "note": None if n % 5 == 0 else f"note {n % 11}",
    }
    if n % 3:
        data["tier"] = rng.choice(["gold", "silver", "bronze"])
    if n % 10 == 0:
        data["mixed"] = "text"
    elif n % 10 == 1:
        data["mixed"] = n
    return data


def _rows() -> list[ProcessRecord]:
    rng = random.Random(16)
    rows = []
    for n in range(N):
        workflow = "acme/sales/deal" if n % 2 else "acme/sales/lead"
        if n % 9 == 0:
            workflow = "globex/ops/task"
        created = at(n // 3)  # ties on created_at: the id breaks them
        due = None if n % 3 == 0 else at(rng.randint(0, 5000))
        rows.append(
            new_process(
                f"{n:08d}-{rng.randrange(16**8):08x}",
                workflow=workflow,
                state=rng.choice(["new", "review", "done"]),
                status=rng.choice(["active", "active", "stale", "completed"]),
                now=created,
                updated_at=at(rng.randint(0, 5000)),
                state_entered_at=at(rng.randint(0, 5000)),
                sla_due_at=due,
                sla_breached_at=at(1) if due is not None and n % 4 == 0 else None,
                data=_data(rng, n),
            )
        )
    return rows


ROWS = _rows()
_seeded: set[str] = set()


@pytest.fixture
async def searchable(module_db_url: str) -> AsyncIterator[UnitOfWorkFactory]:
    engine: AsyncEngine = create_engine(module_db_url)
    # A loaded box: generous statement and idle limits for the bulk load.
    factory = UnitOfWorkFactory.from_engine(engine, DbTimeouts(60_000, 60_000, 120_000))
    if module_db_url not in _seeded:
        async with factory() as uow:
            await insert_processes(uow.session, ROWS)
            await uow.commit()
        _seeded.add(module_db_url)
    yield factory
    await engine.dispose()


# -- the oracle: what each operator means, in Python ------------------------------------


def _at(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return MISSING
        data = data[key]
    return data


def _same_type(a: Any, b: Any) -> bool:
    number = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    return (isinstance(a, str) and isinstance(b, str)) or (
        isinstance(a, number) and isinstance(b, number)
    )


def _equal(found: Any, value: Any) -> bool:
    if found is MISSING:
        return False
    if value is None or found is None:
        return found is None and value is None
    return _same_type(found, value) and found == value


def _holds(c: DataCondition, data: dict[str, Any]) -> bool:
    found = _at(data, c.path)
    if c.op == "EQ":
        return _equal(found, c.value)
    if c.op == "NE":
        return not _equal(found, c.value)
    if c.op == "IN":
        return any(_equal(found, v) for v in c.value)
    if c.op == "EXISTS":
        return (found is not MISSING) == c.value
    if c.op == "CONTAINS":
        if isinstance(c.value, dict):
            return all(_equal(_at(found, (k,)), v) for k, v in c.value.items())
        wanted = c.value if isinstance(c.value, list) else [c.value]
        return isinstance(found, list) and all(any(_equal(f, w) for f in found) for w in wanted)
    if found is MISSING or not _same_type(found, c.value):
        return False
    compare: dict[str, Callable[[Any, Any], bool]] = {
        "GT": lambda a, b: a > b,
        "GTE": lambda a, b: a >= b,
        "LT": lambda a, b: a < b,
        "LTE": lambda a, b: a <= b,
    }
    return compare[c.op](found, c.value)


CONDITIONS = [
    ("amount", "EQ", ROWS[1].data["amount"]),
    ("amount", "EQ", ROWS[7].data["amount"]),
    ("tier", "EQ", "gold"),
    ("customer.vip", "EQ", True),
    ("customer.vip", "EQ", False),
    ("note", "EQ", None),
    ("tier", "NE", "gold"),
    ("customer.name", "NE", "c7"),
    ("amount", "GT", 900),
    ("amount", "GTE", 999.5),
    ("amount", "LT", 10),
    ("amount", "LTE", 10),
    ("tier", "GT", "gold"),
    ("tier", "LTE", "gold"),
    ("mixed", "GT", 100),
    ("mixed", "GT", "a"),
    ("tier", "IN", ["gold", "bronze"]),
    ("amount", "IN", [1, 2, 3, ROWS[14].data["amount"], "1"]),
    ("tags", "CONTAINS", "a"),
    ("tags", "CONTAINS", ["a", "b"]),
    ("customer", "CONTAINS", {"name": "c3", "vip": False}),
    ("tier", "CONTAINS", "gold"),
    ("tier", "EXISTS", True),
    ("tier", "EXISTS", False),
    ("customer.name", "EXISTS", None),
    ("nope.deeper", "EXISTS", True),
]


async def _all(
    factory: UnitOfWorkFactory, search: InstanceSearch, order: Ordering = Ordering(),
    namespaces: list[str] | None = None,
) -> list[str]:  # fmt: skip
    async with factory(readonly=True) as uow:
        found = await uow.search.instances(search, namespaces=namespaces, order=order, limit=N)
        count = await uow.search.count_instances(search, namespaces=namespaces)
    assert count == len(found)
    return [r.id for r, _ in found]


@pytest.mark.parametrize(("path", "op", "value"), CONDITIONS)
async def test_each_data_operator_matches_what_it_means(
    searchable: UnitOfWorkFactory, path: str, op: str, value: Any
) -> None:
    condition = DataCondition.of(path, op, value, "/filter/data/0")
    expected = {r.id for r in ROWS if _holds(condition, r.data)}
    found = await _all(searchable, InstanceSearch(data=(condition,)))
    assert set(found) == expected
    assert expected or (path in ("nope.deeper", "tier") and op in ("EXISTS", "CONTAINS"))


async def test_column_filters_and_data_conditions_combine(searchable: UnitOfWorkFactory) -> None:
    search = InstanceSearch(
        workflow="acme/sales/deal", statuses=("active", "stale"), state="review",
        created_after=at(100), updated_before=at(4000), sla_breached=False,
        data=(DataCondition.of("amount", "GT", 200, "/d"),
              DataCondition.of("tier", "EXISTS", True, "/d")),
    )  # fmt: skip
    expected = [
        r.id for r in sorted(ROWS, key=lambda r: (r.created_at, r.id))
        if r.workflow == "acme/sales/deal" and r.status in ("active", "stale")
        and r.state == "review" and r.created_at > at(100) and r.updated_at < at(4000)
        and r.sla_breached_at is None and _at(r.data, ("tier",)) is not MISSING
        and _same_type(r.data["amount"], 1) and r.data["amount"] > 200
    ]  # fmt: skip
    assert await _all(searchable, search) == expected
    stale = await _all(searchable, InstanceSearch(stale=True, sla_breached=True))
    assert set(stale) == {
        r.id for r in ROWS if r.status == "stale" and r.sla_breached_at is not None
    }


async def test_namespaces_bound_every_search(searchable: UnitOfWorkFactory) -> None:
    acme = await _all(searchable, InstanceSearch(), namespaces=["acme/sales"])
    assert set(acme) == {r.id for r in ROWS if r.namespace == "acme/sales"}
    assert await _all(searchable, InstanceSearch(), namespaces=[]) == []
    hidden = InstanceSearch(namespace="globex/ops")
    assert await _all(searchable, hidden, namespaces=["acme/sales"]) == []


def _oracle_order(order: Ordering) -> list[str]:
    def value(r: ProcessRecord) -> Any:
        if order.field == "DATA":
            found = _at(r.data, order.path)
            return None if found is MISSING else found
        return {
            "CREATED": r.created_at, "UPDATED": r.updated_at,
            "STATE_ENTERED": r.state_entered_at, "SLA_DUE": r.sla_due_at,
        }[order.field]  # fmt: skip

    present = [r for r in ROWS if value(r) is not None]
    absent = [r for r in ROWS if value(r) is None]
    desc = order.direction == "DESC"
    present.sort(key=lambda r: (value(r), r.id), reverse=desc)
    absent.sort(key=lambda r: r.id, reverse=desc)
    return [r.id for r in present + absent]


ORDERS = [
    Ordering(f, d) for f in INSTANCE_ORDERS if f != "DATA" for d in ("ASC", "DESC")
] + [
    Ordering("DATA", d, p) for p in (("amount",), ("tier",), ("customer", "name"))
    for d in ("ASC", "DESC")
]  # fmt: skip


async def _walk(
    factory: UnitOfWorkFactory, order: Ordering, *, backward: bool, size: int = 97
) -> tuple[list[str], int]:
    seen: list[str] = []
    pages = 0
    position = None
    while True:
        async with factory(readonly=True) as uow:
            found = await uow.search.instances(
                InstanceSearch(), namespaces=None, order=order, position=position,
                backward=backward, limit=size,
            )  # fmt: skip
        if not found:
            return seen, pages
        pages += 1
        seen += [r.id for r, _ in found]
        last, value = found[-1]
        position = (value, last.id)


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: o.tag)
async def test_every_ordering_pages_forward_and_backward_as_mirror_images(
    searchable: UnitOfWorkFactory, order: Ordering
) -> None:
    forward, pages = await _walk(searchable, order, backward=False)
    backward, _ = await _walk(searchable, order, backward=True)
    assert len(forward) == len(set(forward)) == N and pages == -(-N // 97)
    assert backward == forward[::-1]
    assert forward == _oracle_order(order)


async def test_a_mixed_type_data_ordering_is_still_total(searchable: UnitOfWorkFactory) -> None:
    order = Ordering("DATA", "ASC", ("mixed",))
    forward, _ = await _walk(searchable, order, backward=False, size=101)
    backward, _ = await _walk(searchable, order, backward=True, size=101)
    assert len(set(forward)) == N and backward == forward[::-1]


@pytest.mark.parametrize(
    ("path", "op", "value", "pointer"),
    [
        ("a..b", "EQ", 1, "/x/path"),
        ("1a", "EQ", 1, "/x/path"),
        ("a.b.c.d.e.f.g.h.i", "EQ", 1, "/x/path"),
        ("a'; drop table processes; --", "EQ", 1, "/x/path"),
        ("a", "EQ", [1], "/x/value"),
        ("a", "GT", True, "/x/value"),
        ("a", "GT", None, "/x/value"),
        ("a", "IN", [], "/x/value"),
        ("a", "IN", "a", "/x/value"),
        ("a", "IN", [[1]], "/x/value"),
        ("a", "CONTAINS", None, "/x/value"),
        ("a", "EXISTS", 1, "/x/value"),
        ("a", "LIKE", 1, "/x/op"),
    ],
)
def test_a_bad_condition_is_invalid_input_at_its_pointer(
    path: str, op: str, value: Any, pointer: str
) -> None:
    with pytest.raises(DomainError) as raised:
        DataCondition.of(path, op, value, "/x")
    assert (raised.value.code, raised.value.pointer) == ("INVALID_INPUT", pointer)


class Explain(Executable, ClauseElement):
    """`EXPLAIN <statement>` (SQLAlchemy's compiler-extension recipe)."""

    inherit_cache = False

    def __init__(self, statement: Any) -> None:
        self.statement = statement


@compiles(Explain, "postgresql")
def _explain(element: Explain, compiler: Any, **kw: Any) -> str:
    return "EXPLAIN " + str(compiler.process(element.statement, **kw))


async def _seed(factory: UnitOfWorkFactory, statements: str) -> None:
    """Run the `---`-separated SQL `statements` in one transaction."""
    async with factory() as uow:
        for statement in statements.split("---"):
            await uow.session.execute(text(statement))
        await uow.commit()


async def _plan(uow: Any, statement: Any) -> str:
    return "\n".join((await uow.session.execute(Explain(statement))).scalars())


SEED_50K = """
INSERT INTO processes (id, kind, namespace, workflow, workflow_version, state, status,
  seq, state_entered_at, last_event_at, created_at, updated_at, automation_chain)
SELECT lpad(n::text, 8, '0'), 'instance', 'acme/sales', 'acme/sales/deal', 1,
  'review', 'active', 1, t, t, t, t, 0
FROM generate_series(1, 50000) AS n, LATERAL (SELECT now() - n * interval '1 second') AS x(t)
---
INSERT INTO process_data (process_id, data)
SELECT lpad(n::text, 8, '0'),
  jsonb_build_object('customer', 'c' || (n % 1000), 'amount', n % 997,
                     'tags', jsonb_build_array('t' || (n % 500), 'common'))
FROM generate_series(1, 50000) AS n
"""


@pytest.mark.postgres
async def test_a_data_condition_uses_the_gin_index_on_50k_instances(
    postgres_db_url: str,
) -> None:
    engine = create_engine(postgres_db_url)
    factory = UnitOfWorkFactory.from_engine(engine, DbTimeouts(60_000, 60_000, 120_000))
    try:
        await _seed(factory, SEED_50K)
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            # As autovacuum would: flush the GIN pending list, refresh the statistics.
            await conn.exec_driver_sql("VACUUM ANALYZE processes, process_data")
        for path, op, value in [
            ("customer", "EQ", "c42"),
            ("tags", "CONTAINS", "t3"),
            ("customer", "IN", ["c1", "c2"]),
        ]:
            search = InstanceSearch(data=(DataCondition.of(path, op, value, "/d"),))
            async with factory(readonly=True) as uow:
                page = uow.search.instance_statement(
                    search, namespaces=["acme/sales"], order=Ordering("CREATED", "DESC"),
                    limit=21,
                )  # fmt: skip
                count = uow.search.count_statement(search, namespaces=["acme/sales"])
                # The data is never read whole: the GIN index finds the matches. (The
                # narrow `processes` rows, all in this one namespace, may be hashed from
                # a scan of that table: the planner's choice at 50k, not at millions.)
                count_plan = await _plan(uow, count)
                assert "Seq Scan on process_data" not in count_plan, count_plan
                assert "Bitmap Index Scan on ix_process_data_data" in count_plan, count_plan
                # A first page may instead walk the (created_at, id) index backwards and stop
                # after 21 matches: the planner's choice, and also no full scan.
                page_plan = await _plan(uow, page)
                assert "Seq Scan on process_data" not in page_plan, page_plan
                assert (
                    "Bitmap Index Scan on ix_process_data_data" in page_plan
                    or "Index Scan Backward using ix_processes_created_at_id" in page_plan
                ), page_plan
    finally:
        await engine.dispose()


SEED_20K_OLD_MATCHES = """
INSERT INTO processes (id, kind, namespace, workflow, workflow_version, state, status,
  seq, state_entered_at, last_event_at, created_at, updated_at, automation_chain)
SELECT lpad(n::text, 8, '0'), 'instance', 'acme/support', 'acme/support/case', 1,
  'open', 'active', 1, t, t, t, t, 0
FROM generate_series(0, 19999) AS n,
  LATERAL (SELECT timestamptz '2026-01-01' + n * interval '1 second') AS x(t)
---
INSERT INTO process_data (process_id, data)
SELECT lpad(n::text, 8, '0'),
  jsonb_build_object('customer', 'c' || (n / 50), 'amount', n % 997,
                     'tags', jsonb_build_array('t' || (n % 13)), 'note', repeat('x', 40))
FROM generate_series(0, 19999) AS n
"""


_TARGET = (
    "SELECT attstattarget FROM pg_attribute"
    " WHERE attrelid = 'process_data'::regclass AND attname = 'data'"
)
#: Customers whose documents are histogram bounds of the data column.
_BOUND_CUSTOMERS = """
SELECT DISTINCT b ->> 'customer' FROM pg_stats, unnest(histogram_bounds::text::jsonb[]) AS b
WHERE tablename = 'process_data' AND attname = 'data'
"""


async def _analyze_with_target(engine: AsyncEngine, target: int) -> list[str]:
    """Set the data column's statistics target, ANALYZE; the customers that are bounds."""
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.exec_driver_sql(
            f"ALTER TABLE process_data ALTER COLUMN data SET STATISTICS {target}"
        )
        await conn.exec_driver_sql("VACUUM ANALYZE processes, process_data")
        return list((await conn.exec_driver_sql(_BOUND_CUSTOMERS)).scalars())


@pytest.mark.postgres
async def test_a_rare_value_among_the_oldest_is_found_through_the_gin_index(
    postgres_db_url: str,
) -> None:
    """Migration 0020: with the default statistics target (100) every histogram bound of
    the data stands for 1 % of the rows, so a customer with 50 of 20,000 instances whose
    document happens to be a bound was estimated at 1 %, and the newest-first page walked
    the creation index past thousands of instances to its old matches. At the migration's
    target (1,000) the estimate is near the truth and the GIN index finds them."""
    engine = create_engine(postgres_db_url)
    factory = UnitOfWorkFactory.from_engine(engine, DbTimeouts(60_000, 60_000, 120_000))

    async def page_plan(customer: str) -> str:
        search = InstanceSearch(data=(DataCondition.of("customer", "EQ", customer, "/d"),))
        async with factory(readonly=True) as uow:
            page = uow.search.instance_statement(
                search, namespaces=["acme/support"], order=Ordering("CREATED", "DESC"), limit=21
            )
            return await _plan(uow, page)

    try:
        await _seed(factory, SEED_20K_OLD_MATCHES)
        async with engine.connect() as conn:
            migrated = (await conn.exec_driver_sql(_TARGET)).scalar_one()
        assert migrated == 1000
        # The trap, at the default target: an old customer that is a bound walks the index.
        bounds = await _analyze_with_target(engine, 100)
        old = min((c for c in bounds if c), key=lambda c: int(c[1:]))
        assert int(old[1:]) < 200  # its 50 instances are among the oldest half
        walked = await page_plan(old)
        assert "Index Scan Backward using ix_processes_created_at_id" in walked, walked
        # At the migrated target the same search reads the GIN index.
        await _analyze_with_target(engine, migrated)
        plan = await page_plan(old)
        assert "Bitmap Index Scan on ix_process_data_data" in plan, plan
        assert "ix_processes_created_at_id" not in plan, plan
    finally:
        await engine.dispose()


_SCANS = "SELECT pg_stat_get_xact_numscans(CAST(:index AS regclass))"


@pytest.mark.postgres
async def test_a_data_search_is_planned_for_its_values_every_time(
    postgres_db_url: str,
) -> None:
    """The driver prepares statements and PostgreSQL may switch a prepared statement to
    a generic plan after five executions; a generic plan estimates `data @> $n` at 1 %
    and walks the creation index to old matches. `SearchRepository.instances` plans each
    data search for its values: twelve pages in a row all read the GIN index."""
    engine = create_engine(postgres_db_url)
    factory = UnitOfWorkFactory.from_engine(engine, DbTimeouts(60_000, 60_000, 120_000))
    try:
        await _seed(factory, SEED_20K_OLD_MATCHES)
        await _analyze_with_target(engine, 1000)
        search = InstanceSearch(data=(DataCondition.of("customer", "EQ", "c3", "/d"),))
        async with factory(readonly=True) as uow:
            for _ in range(12):
                page = await uow.search.instances(
                    search, namespaces=["acme/support"], order=Ordering("CREATED", "DESC"),
                    limit=21,
                )  # fmt: skip
                assert len(page) == 21
            gin, walk = [
                (await uow.session.execute(text(_SCANS), {"index": index})).scalar_one()
                for index in ("ix_process_data_data", "ix_processes_created_at_id")
            ]
        assert (gin, walk) == (12, 0)
    finally:
        await engine.dispose()


async def test_a_search_made_again_reuses_its_statement(searchable: UnitOfWorkFactory) -> None:
    """A dashboard's repeated page reuses one statement object (its SQLAlchemy cache key
    derived once); anything that changes the SQL or its values makes another, and data
    searches are never remembered (JSON `true` and `1` compare equal in Python)."""
    deal = InstanceSearch(workflow="acme/sales/deal", statuses=("active",))
    async with searchable(readonly=True) as uow:
        search = uow.search
        page = search.instance_statement(deal, namespaces=["acme/sales"], limit=5)
        again = InstanceSearch(workflow="acme/sales/deal", statuses=("active",))
        assert search.instance_statement(again, namespaces=("acme/sales",), limit=5) is page
        assert search.instance_statement(deal, namespaces=None, limit=5) is not page
        assert search.instance_statement(deal, namespaces=["acme/sales"], limit=6) is not page
        long = InstanceSearch(workflow="x" * 2000)  # a caller's huge value is not kept
        assert search.instance_statement(long, namespaces=None) is not search.instance_statement(
            long, namespaces=None
        )
        count = search.count_statement(deal, namespaces=None)
        assert search.count_statement(deal, namespaces=None) is count
        vip = InstanceSearch(data=(DataCondition.of("customer.vip", "EQ", True, "/d"),))
        one = InstanceSearch(data=(DataCondition.of("customer.vip", "EQ", 1, "/d"),))
        assert search.instance_statement(vip, namespaces=None) is not search.instance_statement(
            vip, namespaces=None
        )
        first = await search.instances(deal, namespaces=None, limit=5)
        assert await search.instances(deal, namespaces=None, limit=5) == first
        last_value, last_id = first[-1][1], first[-1][0].id
        after = await search.instances(
            deal, namespaces=None, position=(last_value, last_id), limit=5
        )
        assert not {r.id for r, _ in after} & {r.id for r, _ in first}
        vips = await search.instances(vip, namespaces=None, limit=N)
        ones = await search.instances(one, namespaces=None, limit=N)
    assert vips and {r.id for r, _ in vips} == {r.id for r in ROWS if r.data["customer"]["vip"]}
    assert ones == []  # `1` is not `true` in JSON, whatever was searched before
