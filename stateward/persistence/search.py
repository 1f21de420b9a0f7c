"""Instance search in SQL: filters, data conditions over JSON, keyset order, counts.

One statement per page and one `count(*)` (only when a caller asks for it); Python never
loops over all rows. Data conditions (`domain.search.DataCondition`) compile per dialect:

- PostgreSQL (jsonb): `EQ`, `NE`, `IN` and `CONTAINS` become containment (`data @> ...`),
  which the GIN index `ix_process_data_data` (`jsonb_path_ops`) answers; `EXISTS` is a
  jsonpath test (`data @? '$."a"."b"'`, also indexable); ranges compare the jsonb value
  (numbers) or its text in the "C" collation (strings) after checking its JSON type.
  Such a search is planned for its values every time (`plan_cache_mode`, see
  `SearchRepository.plan_for_values`): a cached generic plan cannot see how rare a value
  is and takes the 1 % default for `@>`.
- SQLite (JSON1): `json_type` / `json_extract` / `json_each` at the same path, with the
  same type rules, so both databases return the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Select,
    Table,
    and_,
    exists,
    false,
    func,
    literal,
    literal_column,
    not_,
    or_,
    select,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB, JSONPATH
from sqlalchemy.sql.elements import ColumnElement

from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.search import (
    AssignmentSearch,
    AuditSearch,
    DataCondition,
    InstanceSearch,
    Ordering,
)
from stateward.persistence.base import Repository, to_record
from stateward.persistence.kernel import namespace_scope
from stateward.persistence.keyset import SortKey, after, order_by
from stateward.persistence.models import Event, Process
from stateward.persistence.models_ops import Assignment, AssignmentCandidate
from stateward.persistence.processes import RECORD_COLUMNS, WITH_DATA, D, process_record
from stateward.records import INSTANCE, AssignmentRecord, ProcessRecord, StoredEvent

P = cast(Table, Process.__table__)
A = cast(Table, Assignment.__table__)
C = cast(Table, AssignmentCandidate.__table__)
OPEN_ASSIGNMENT = ("unassigned", "claimed")
_RANGE_SQL = {"GT": "__gt__", "GTE": "__ge__", "LT": "__lt__", "LTE": "__le__"}


def _nest(path: Sequence[str], value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


class _Postgres:
    """Data conditions on jsonb."""

    def contains(self, doc: Any) -> ColumnElement[bool]:
        return D.c.data.op("@>")(literal(doc, JSONB))  # type: ignore[no-any-return]

    def value(self, path: Sequence[str]) -> ColumnElement[Any]:
        return func.jsonb_extract_path(D.c.data, *path, type_=JSONB)

    def sort_value(self, path: Sequence[str]) -> ColumnElement[Any]:
        return func.nullif(self.value(path), literal_column("'null'::jsonb", JSONB), type_=JSONB)

    def condition(self, c: DataCondition) -> ColumnElement[bool]:
        if c.op == "EQ":
            return self.contains(_nest(c.path, c.value))
        if c.op == "NE":
            return not_(self.contains(_nest(c.path, c.value)))
        if c.op == "IN":
            return or_(*(self.contains(_nest(c.path, v)) for v in c.value))
        if c.op == "CONTAINS":
            inner = c.value if isinstance(c.value, (list, dict)) else [c.value]
            return self.contains(_nest(c.path, inner))
        if c.op == "EXISTS":
            jsonpath = "$" + "".join(f'."{k}"' for k in c.path)
            found = D.c.data.op("@?")(literal(jsonpath, JSONPATH))
            return found if c.value else not_(found)  # type: ignore[no-any-return]
        method = _RANGE_SQL[c.op]
        if isinstance(c.value, str):
            text = func.jsonb_extract_path_text(D.c.data, *c.path).collate("C")
            typed = func.jsonb_typeof(self.value(c.path)) == "string"
            return and_(typed, getattr(text, method)(c.value))
        typed = func.jsonb_typeof(self.value(c.path)) == "number"
        return and_(typed, getattr(self.value(c.path), method)(literal(c.value, JSONB)))


class _Sqlite:
    """Data conditions with JSON1."""

    @staticmethod
    def _path(path: Sequence[str]) -> str:
        return "$" + "".join(f'."{k}"' for k in path)

    def value(self, path: Sequence[str]) -> ColumnElement[Any]:
        return func.json_extract(D.c.data, self._path(path))

    def sort_value(self, path: Sequence[str]) -> ColumnElement[Any]:
        return self.value(path)

    def kind(self, path: Sequence[str]) -> ColumnElement[Any]:
        return func.json_type(D.c.data, self._path(path))

    @staticmethod
    def _scalar_is(kind: ColumnElement[Any], value: ColumnElement[Any], v: Any) -> Any:
        if v is None:
            return kind == "null"
        if isinstance(v, bool):
            return kind == ("true" if v else "false")
        if isinstance(v, str):
            return and_(kind == "text", value == v)
        return and_(kind.in_(("integer", "real")), value == v)

    def equal(self, path: Sequence[str], v: Any) -> ColumnElement[bool]:
        return func.coalesce(self._scalar_is(self.kind(path), self.value(path), v), False) == 1

    def has_element(self, path: Sequence[str], v: Any) -> ColumnElement[bool]:
        each = func.json_each(D.c.data, self._path(path)).table_valued("value", "type")
        return exists().select_from(each).where(self._scalar_is(each.c.type, each.c.value, v))

    def condition(self, c: DataCondition) -> ColumnElement[bool]:
        if c.op == "EQ":
            return self.equal(c.path, c.value)
        if c.op == "NE":
            return not_(self.equal(c.path, c.value))
        if c.op == "IN":
            return or_(*(self.equal(c.path, v) for v in c.value))
        if c.op == "CONTAINS":
            if isinstance(c.value, dict):
                return and_(true(), *(self.equal((*c.path, k), v) for k, v in c.value.items()))
            wanted = c.value if isinstance(c.value, list) else [c.value]
            is_array = self.kind(c.path) == "array"
            return and_(is_array, *(self.has_element(c.path, v) for v in wanted))
        if c.op == "EXISTS":
            found = self.kind(c.path).is_not(None)
            return found if c.value else not_(found)
        method = _RANGE_SQL[c.op]
        kind = self.kind(c.path)
        typed = kind == "text" if isinstance(c.value, str) else kind.in_(("integer", "real"))
        return and_(typed, getattr(self.value(c.path), method)(c.value))


def instances_from(search: InstanceSearch) -> Any:
    """What a search's statement selects from: the processes, joined to their data when
    a condition reads it (the data is in `process_data`)."""
    return WITH_DATA if search.data else P


def _open_assignment(column: Any, value: str) -> ColumnElement[bool]:
    return exists().where(
        A.c.process_id == P.c.id, A.c.status.in_(OPEN_ASSIGNMENT), column == value
    )


#: PostgreSQL: plan this transaction's statements for their parameter values.
_CUSTOM_PLANS = text("SELECT set_config('plan_cache_mode', 'force_custom_plan', true)")


class SearchRepository(Repository):
    """Instance searches: one SELECT per page, one COUNT when asked."""

    def _json(self) -> _Postgres | _Sqlite:
        return _Postgres() if self.dialect == "postgresql" else _Sqlite()

    async def plan_for_values(self, search: InstanceSearch, order: Ordering) -> None:
        """On PostgreSQL, make the rest of this transaction plan each statement for its
        parameter values when `search` reads the data. The driver prepares statements,
        and after five executions PostgreSQL may keep a generic plan, which estimates
        every `data @> $n` at 1 %: a customer with 50 of 20,000 instances, all old, was
        then found by walking the creation index past 18,000 of them (30 ms, against
        0.5 ms through the GIN index; docs/decisions.md, "A data search is planned for
        its values")."""
        if self.dialect == "postgresql" and (search.data or order.field == "DATA"):
            await self.session.execute(_CUSTOM_PLANS)

    def instance_where(
        self, search: InstanceSearch, namespaces: Sequence[str] | None
    ) -> list[ColumnElement[bool]]:
        """The WHERE terms of `search`, limited to `namespaces` (None = every namespace)."""
        s = search
        where: list[ColumnElement[bool]] = [P.c.kind == INSTANCE]
        if namespaces is not None:
            where.append(P.c.namespace.in_(list(namespaces)) if namespaces else false())
        for column, value in (
            (P.c.namespace, s.namespace),
            (P.c.workflow, s.workflow),
            (P.c.state, s.state),
            (P.c.parent_id, s.parent),
        ):
            if value is not None:
                where.append(column == value)
        if s.statuses:
            where.append(P.c.status.in_(list(s.statuses)))
        for column, bound, later in (
            (P.c.created_at, s.created_after, True),
            (P.c.created_at, s.created_before, False),
            (P.c.updated_at, s.updated_after, True),
            (P.c.updated_at, s.updated_before, False),
        ):
            if bound is not None:
                where.append(column > bound if later else column < bound)
        if s.sla_breached is not None:
            breached = P.c.sla_breached_at.is_not(None)
            where.append(breached if s.sla_breached else P.c.sla_breached_at.is_(None))
        if s.stale is not None:
            where.append(P.c.status == "stale" if s.stale else P.c.status != "stale")
        if s.team is not None:
            where.append(_open_assignment(A.c.team, s.team))
        if s.assignee is not None:
            where.append(_open_assignment(A.c.assignee, s.assignee))
        json = self._json()
        where.extend(json.condition(c) for c in s.data)
        return where

    def instance_keys(self, order: Ordering) -> list[SortKey]:
        """The sort keys of `order`, the id last."""
        desc = order.direction == "DESC"
        columns = {
            "CREATED": P.c.created_at,
            "UPDATED": P.c.updated_at,
            "STATE_ENTERED": P.c.state_entered_at,
            "SLA_DUE": P.c.sla_due_at,
        }
        if order.field == "DATA":
            first = SortKey(self._json().sort_value(order.path), desc, nullable=True)
        else:
            first = SortKey(columns[order.field], desc, nullable=order.field == "SLA_DUE")
        return [first, SortKey(P.c.id, desc)]

    def instance_statement(
        self,
        search: InstanceSearch,
        *,
        namespaces: Sequence[str] | None,
        order: Ordering = Ordering(),
        position: tuple[Any, str] | None = None,
        backward: bool = False,
        limit: int = 50,
    ) -> Select[Any]:
        """The SELECT of one page (see `instances`)."""
        key = _statement_key(
            "page", self.dialect, search, namespaces, order, (backward, limit), position
        )
        return _remembered(key, lambda: self._page(search, namespaces, order, position,
                                                    backward, limit))  # fmt: skip

    def _page(
        self,
        search: InstanceSearch,
        namespaces: Sequence[str] | None,
        order: Ordering,
        position: tuple[Any, str] | None,
        backward: bool,
        limit: int,
    ) -> Select[Any]:
        keys = self.instance_keys(order)
        stmt = (
            select(*RECORD_COLUMNS, keys[0].expr.label("sort_value"))
            .select_from(WITH_DATA)
            .where(*self.instance_where(search, namespaces))
        )
        if position is not None:
            position = (sort_value_of(order, position[0]), position[1])
            stmt = stmt.where(after(keys, position, backward))
        return stmt.order_by(*order_by(keys, backward)).limit(limit)

    def count_statement(
        self, search: InstanceSearch, *, namespaces: Sequence[str] | None
    ) -> Select[Any]:
        """The COUNT of every match (see `count_instances`)."""
        key = _statement_key("count", self.dialect, search, namespaces, Ordering(), (), None)
        return _remembered(
            key,
            lambda: (
                select(func.count())
                .select_from(instances_from(search))
                .where(*self.instance_where(search, namespaces))
            ),
        )

    async def instances(
        self,
        search: InstanceSearch,
        *,
        namespaces: Sequence[str] | None,
        order: Ordering = Ordering(),
        position: tuple[Any, str] | None = None,
        backward: bool = False,
        limit: int = 50,
    ) -> list[tuple[ProcessRecord, Any]]:
        """Up to `limit` matches after `position` (in the mirrored order when `backward`),
        each with its sort value (the first half of the next cursor)."""
        stmt = self.instance_statement(
            search, namespaces=namespaces, order=order, position=position,
            backward=backward, limit=limit,
        )  # fmt: skip
        await self.plan_for_values(search, order)
        rows = await self.session.execute(stmt)
        return [(process_record(r), r.sort_value) for r in rows]

    async def count_instances(
        self, search: InstanceSearch, *, namespaces: Sequence[str] | None
    ) -> int:
        """How many instances match `search` within `namespaces`."""
        stmt = self.count_statement(search, namespaces=namespaces)
        await self.plan_for_values(search, Ordering())
        return int((await self.session.execute(stmt)).scalar_one())

    async def instance_ids(
        self, search: InstanceSearch, *, namespaces: Sequence[str] | None, limit: int
    ) -> list[str]:
        """Ids of up to `limit` matches, oldest first (bulk operations work on these)."""
        stmt = (
            select(P.c.id)
            .select_from(instances_from(search))
            .where(*self.instance_where(search, namespaces))
            .order_by(P.c.created_at, P.c.id)
            .limit(limit)
        )
        await self.plan_for_values(search, Ordering())
        return list((await self.session.execute(stmt)).scalars())


MAX_GROUPS = 1000
E = cast(Table, Event.__table__)


@dataclass(frozen=True)
class AssignmentScope:
    """Which assignments a viewer may list: every one (`everything`, admins of `system`);
    any team's in `admin_namespaces` (or below); team `role`'s in the namespaces of
    `teams[role]` (or below), the rule of a team queue; and, in `readable` namespaces,
    those it claimed or is a candidate for (`actor`)."""

    everything: bool = False
    admin_namespaces: tuple[str, ...] = ()
    teams: tuple[tuple[str, tuple[str, ...]], ...] = ()
    readable: tuple[str, ...] = ()
    actor: str | None = None


def _candidate(actor: str) -> ColumnElement[bool]:
    return exists().where(C.c.assignment_id == A.c.id, C.c.candidate == actor)


class AssignmentSearchRepository(Repository):
    """Assignment searches (issue 16): one SELECT per page over `assignments` joined to
    its instance (for namespaces), one COUNT when asked."""

    @staticmethod
    def where(search: AssignmentSearch, scope: AssignmentScope) -> list[ColumnElement[bool]]:
        """The WHERE terms of `search` within what `scope` may see."""
        s = search
        where: list[ColumnElement[bool]] = []
        if not scope.everything:
            seen: list[ColumnElement[bool]] = [
                namespace_scope(P.c.namespace, scope.admin_namespaces)
            ]
            for role, namespaces in scope.teams:
                seen.append(
                    and_(func.lower(A.c.team) == role, namespace_scope(P.c.namespace, namespaces))
                )
            if scope.actor is not None and scope.readable:
                mine = or_(A.c.assignee == scope.actor, _candidate(scope.actor))
                seen.append(and_(mine, namespace_scope(P.c.namespace, scope.readable)))
            where.append(or_(*seen))
        for column, value in (
            (A.c.team, s.team),
            (A.c.assignee, s.assignee),
            (P.c.namespace, s.namespace),
            (A.c.process_id, s.process),
        ):
            if value is not None:
                where.append(column == value)
        if s.statuses:
            where.append(A.c.status.in_(list(s.statuses)))
        if s.candidate is not None:
            where.append(_candidate(s.candidate))
        if s.mine is not None:  # the rule of `AssignmentRepository.mine`
            candidacy = and_(
                A.c.status == "unassigned", _candidate(s.mine),
                namespace_scope(P.c.namespace, s.mine_readable),
            )  # fmt: skip
            where.append(or_(A.c.assignee == s.mine, candidacy))
        if s.due_before is not None:
            where.append(A.c.due_at < s.due_before)
        if s.min_priority is not None:
            where.append(A.c.priority >= s.min_priority)
        return where

    @staticmethod
    def keys(order: Ordering) -> list[SortKey]:
        """The sort keys of `order`, the id last (NULL dates / priorities last)."""
        desc = order.direction == "DESC"
        column = {"CREATED": A.c.created_at, "DUE": A.c.due_at, "PRIORITY": A.c.priority}
        first = SortKey(column[order.field], desc, nullable=order.field != "CREATED")
        return [first, SortKey(A.c.id, desc)]

    def _from(self) -> Any:
        return A.join(P, P.c.id == A.c.process_id)

    async def assignments(
        self, search: AssignmentSearch, *, scope: AssignmentScope, order: Ordering,
        position: tuple[Any, str] | None, backward: bool, limit: int,
    ) -> list[tuple[AssignmentRecord, Any]]:  # fmt: skip
        """Up to `limit` matches after `position` (mirrored when `backward`), each with its
        sort value."""
        keys = self.keys(order)
        stmt = (
            select(A, keys[0].expr.label("sort_value"))
            .select_from(self._from())
            .where(*self.where(search, scope))
        )
        if position is not None:
            stmt = stmt.where(after(keys, position, backward))
        stmt = stmt.order_by(*order_by(keys, backward)).limit(limit)
        rows = await self.session.execute(stmt)
        return [(to_record(AssignmentRecord, r), r.sort_value) for r in rows]

    async def count(self, search: AssignmentSearch, *, scope: AssignmentScope) -> int:
        """How many assignments match within `scope`."""
        stmt = select(func.count()).select_from(self._from()).where(*self.where(search, scope))
        return int((await self.session.execute(stmt)).scalar_one())


class AuditRepository(Repository):
    """The audit log: every event, filtered, newest first by default, keyset-paged."""

    def _where(self, s: AuditSearch, namespaces: Sequence[str] | None) -> list[Any]:
        where: list[Any] = []
        if namespaces is not None or s.namespace is not None:
            inside = select(P.c.id).where(P.c.id == E.c.process_id)
            if namespaces is not None:
                inside = inside.where(
                    P.c.namespace.in_(list(namespaces)) if namespaces else false()
                )
            if s.namespace is not None:
                inside = inside.where(P.c.namespace == s.namespace)
            where.append(exists(inside))
        for column, value in (
            (E.c.actor, s.actor),
            (E.c.workflow, s.workflow),
            (E.c.action, s.action),
            (E.c.process_id, s.process),
        ):
            if value is not None:
                where.append(column == value)
        if s.since is not None:
            where.append(E.c.recorded_at >= s.since)
        if s.until is not None:
            where.append(E.c.recorded_at < s.until)
        return where

    @staticmethod
    def keys(descending: bool) -> list[SortKey]:
        """Recording time, then the row id (commit order)."""
        return [SortKey(E.c.recorded_at, descending), SortKey(E.c.id, descending)]

    async def events(
        self, search: AuditSearch, *, namespaces: Sequence[str] | None, descending: bool,
        position: tuple[Any, int] | None, backward: bool, limit: int,
    ) -> list[StoredEvent]:  # fmt: skip
        """Up to `limit` events after `position` ((recorded_at, id))."""
        keys = self.keys(descending)
        stmt = select(E).where(*self._where(search, namespaces))
        if position is not None:
            stmt = stmt.where(after(keys, position, backward))
        stmt = stmt.order_by(*order_by(keys, backward)).limit(limit)
        return [to_record(StoredEvent, r) for r in await self.session.execute(stmt)]

    async def count(self, search: AuditSearch, *, namespaces: Sequence[str] | None) -> int:
        """How many events match."""
        stmt = select(func.count()).select_from(E).where(*self._where(search, namespaces))
        return int((await self.session.execute(stmt)).scalar_one())


class CountRepository(Repository):
    """Aggregates for dashboards: GROUP BY in SQL, at most `MAX_GROUPS` rows."""

    async def instance_counts(
        self, search: InstanceSearch, groups: Sequence[str], *, namespaces: Sequence[str] | None
    ) -> list[tuple[dict[str, Any], int]]:
        """(group values, count) of the instances matching `search`, by `groups`."""
        columns = {"WORKFLOW": P.c.workflow, "STATE": P.c.state, "STATUS": P.c.status}
        keys = [columns[g].label(g) for g in groups]
        instances = SearchRepository(self.session)
        where = instances.instance_where(search, namespaces)
        await instances.plan_for_values(search, Ordering())
        stmt = (
            select(*keys, func.count().label("n"))
            .select_from(instances_from(search))
            .where(*where)
            .group_by(*keys)
            .order_by(*keys)
            .limit(MAX_GROUPS)
        )
        rows = await self.session.execute(stmt)
        return [({g: getattr(r, g) for g in groups}, int(r.n)) for r in rows]

    async def assignment_counts(
        self, search: AssignmentSearch, groups: Sequence[str], *, namespaces: Sequence[str] | None
    ) -> list[tuple[dict[str, Any], int]]:
        """(group values, count) of the assignments matching `search`, by `groups`."""
        columns = {"TEAM": A.c.team, "STATUS": A.c.status, "ASSIGNEE": A.c.assignee}
        keys = [columns[g].label(g) for g in groups]
        stmt = select(*keys, func.count().label("n")).select_from(
            A.join(P, P.c.id == A.c.process_id)
        )
        if namespaces is not None:
            stmt = stmt.where(P.c.namespace.in_(list(namespaces)) if namespaces else false())
        s = search
        for column, value in (
            (A.c.team, s.team),
            (A.c.assignee, s.assignee),
            (P.c.namespace, s.namespace),
            (A.c.process_id, s.process),
        ):
            if value is not None:
                stmt = stmt.where(column == value)
        if s.statuses:
            stmt = stmt.where(A.c.status.in_(list(s.statuses)))
        stmt = stmt.group_by(*keys).order_by(*keys).limit(MAX_GROUPS)
        rows = await self.session.execute(stmt)
        return [({g: getattr(r, g) for g in groups}, int(r.n)) for r in rows]


#: Search statements made before, by what they were made of (`_statement_key`), at most
#: `_STATEMENTS_MAX`: a dashboard polls the same page again and again, and a statement
#: object used again keeps the cache key SQLAlchemy derived for it, so neither the
#: statement nor its key is built again (together ≈ 10 % of serving a page of 16
#: instances; docs/performance.md, `row18`).
_STATEMENTS: dict[tuple[Any, ...], Select[Any]] = {}
_STATEMENTS_MAX = 256
#: Characters of filter and cursor text beyond which a search is not remembered, so 256
#: remembered statements hold at most a few hundred KiB of a caller's values.
_KEY_TEXT_MAX = 1024


def _statement_key(
    kind: str,
    dialect: str,
    search: InstanceSearch,
    namespaces: Sequence[str] | None,
    order: Ordering,
    shape: tuple[Any, ...],
    position: tuple[Any, str] | None,
) -> tuple[Any, ...] | None:
    """The key of a search statement, or None when it is not remembered: data
    conditions and data ordering are left out (their JSON values may compare equal
    across types, `True == 1`, where SQL does not); each value of a position goes in
    with its type for the same reason; a search whose filter and cursor texts are long
    (`_KEY_TEXT_MAX`); and a key that cannot be hashed."""
    if search.data or order.field == "DATA":
        return None
    texts = [search.workflow, search.namespace, search.state, search.parent, search.team,
             search.assignee, *search.statuses, *(position or ())]  # fmt: skip
    if sum(len(t) for t in texts if isinstance(t, str)) > _KEY_TEXT_MAX:
        return None  # a caller's long filter values are not kept in memory
    visible = None if namespaces is None else tuple(namespaces)
    key: tuple[Any, ...] = (kind, dialect, search, visible, order, shape)
    if position is not None:
        key += tuple((type(v), v) for v in position)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _remembered(key: Any, build: Any) -> Select[Any]:
    """The statement remembered under `key`, else `build()` (remembered when `key`)."""
    if key is None:
        return cast(Select[Any], build())
    found = _STATEMENTS.get(key)
    if found is None:
        if len(_STATEMENTS) >= _STATEMENTS_MAX:
            _STATEMENTS.clear()
        found = _STATEMENTS[key] = build()
    return found


def sort_value_of(order: Ordering, value: Any) -> Any:
    """A cursor's sort value back in the type SQL compares (datetimes for time fields)."""
    if order.field == "DATA" or value is None or isinstance(value, datetime):
        return value
    try:
        found = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        found = None
    if found is None or found.tzinfo is None:
        raise DomainError(INVALID_INPUT, "invalid cursor", pointer="/after")
    return found
