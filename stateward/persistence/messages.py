"""Message correlation rows (issue 15): messages, the waits index and deliveries.

Every statement a publish, a state entry or a delivery needs is an indexed lookup:
waits by `(name, correlation_key)`, messages by `(name, correlation_key, expires_at)`,
deliveries by id or `(status, id)`. Nothing here reads instance data.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, delete, insert, or_, select, update

from stateward.persistence.base import Repository, to_record
from stateward.persistence.models_messages import Message, MessageDelivery, MessageWait
from stateward.records import MessageDeliveryRecord, MessageRecord

M = cast(Table, Message.__table__)
W = cast(Table, MessageWait.__table__)
D = cast(Table, MessageDelivery.__table__)
PENDING = "pending"
DELIVERED = "delivered"
NOT_APPLICABLE = "not_applicable"


def _under(column: Any, namespace: str) -> Any:
    """`column` is `namespace` or a namespace below it (`system` covers every one)."""
    if namespace == "system":
        return column.is_not(None)
    return or_(column == namespace, column.like(namespace.replace("%", r"\%").replace("_", r"\_")
                                                + "/%", escape="\\"))  # fmt: skip


class MessageRepository(Repository):
    """`messages`, `message_waits` and `message_deliveries` rows."""

    async def find(self, namespace: str, name: str, message_id: str) -> MessageRecord | None:
        """The message published as `message_id` (idempotency), or None."""
        stmt = select(M).where(
            M.c.namespace == namespace, M.c.name == name, M.c.message_id == message_id
        )
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else to_record(MessageRecord, row)

    async def get(self, ref: int) -> MessageRecord | None:
        """The message with row id `ref`."""
        row = (await self.session.execute(select(M).where(M.c.id == ref))).one_or_none()
        return None if row is None else to_record(MessageRecord, row)

    async def add(self, **values: Any) -> MessageRecord:
        """Insert a message (a duplicate `message_id` raises IntegrityError)."""
        row = (await self.session.execute(insert(M).values(**values).returning(*M.c))).one()
        return to_record(MessageRecord, row)

    async def waiting(self, namespace: str, name: str, key: str) -> list[tuple[str, str]]:
        """(process id, action) of every instance waiting for `name` with `key` in
        `namespace` or below, by process id."""
        stmt = (
            select(W.c.process_id, W.c.action)
            .where(W.c.name == name, W.c.correlation_key == key, _under(W.c.namespace, namespace))
            .order_by(W.c.process_id)
        )
        return [(r.process_id, r.action) for r in await self.session.execute(stmt)]

    async def live_for(
        self, scopes: Sequence[str], name: str, key: str, now: datetime
    ) -> list[int]:
        """Ids of the unexpired messages `name`/`key` published in one of `scopes`."""
        stmt = select(M.c.id).where(
            M.c.name == name,
            M.c.correlation_key == key,
            M.c.expires_at > now,
            M.c.namespace.in_(list(scopes)),
        )
        return list((await self.session.execute(stmt)).scalars())

    async def replace_waits(
        self, process_id: str, namespace: str, waits: Iterable[tuple[str, str, str]]
    ) -> None:
        """The process now waits for exactly `waits` ((name, key, action) each)."""
        await self.session.execute(delete(W).where(W.c.process_id == process_id))
        rows = [
            {"process_id": process_id, "name": n, "correlation_key": k, "action": a,
             "namespace": namespace}
            for n, k, a in waits
        ]  # fmt: skip
        if rows:
            await self.session.execute(insert(W), rows)

    async def add_deliveries(
        self, message_ref: int, targets: Iterable[tuple[str, str]], now: datetime
    ) -> list[int]:
        """Pending deliveries of `message_ref` to each (process, action) not reached yet;
        returns the ids created (a process already reached is skipped)."""
        created = []
        for process_id, action in targets:
            stmt = self.insert_ignoring_conflicts(
                D,
                {"message_ref": message_ref, "process_id": process_id, "action": action,
                 "status": PENDING, "created_at": now},
                ("message_ref", "process_id"),
            ).returning(D.c.id)  # fmt: skip
            ident = (await self.session.execute(stmt)).scalar_one_or_none()
            if ident is not None:
                created.append(int(ident))
        return created

    async def delivery(self, delivery_id: int) -> MessageDeliveryRecord | None:
        """One delivery row."""
        stmt = select(D).where(D.c.id == delivery_id)
        row = (await self.session.execute(stmt)).one_or_none()
        return None if row is None else to_record(MessageDeliveryRecord, row)

    async def deliveries_of(self, message_ref: int) -> list[MessageDeliveryRecord]:
        """Every delivery of a message, by id."""
        stmt = select(D).where(D.c.message_ref == message_ref).order_by(D.c.id)
        return [to_record(MessageDeliveryRecord, r) for r in await self.session.execute(stmt)]

    async def pending(self, limit: int, after: int = 0) -> list[MessageDeliveryRecord]:
        """Up to `limit` pending deliveries with id > `after`, oldest first (a sweep's
        page: each is closed by its `$message` event's conditional update)."""
        stmt = select(D).where(D.c.status == PENDING, D.c.id > after).order_by(D.c.id).limit(limit)
        return [to_record(MessageDeliveryRecord, r) for r in await self.session.execute(stmt)]

    async def close(
        self, delivery_id: int, status: str, now: datetime, node: str, detail: str | None = None
    ) -> bool:
        """pending -> `status` (conditional: True for the one caller that wins)."""
        stmt = (
            update(D)
            .where(D.c.id == delivery_id, D.c.status == PENDING)
            .values(status=status, delivered_at=now, claimed_by=node, detail=detail)
        )
        result = await self.session.execute(stmt)
        return int(result.rowcount) == 1  # type: ignore[attr-defined]

    async def waits_of(self, process_id: str) -> list[tuple[str, str, str]]:
        """(name, key, action) the process waits for now."""
        stmt = select(W.c.name, W.c.correlation_key, W.c.action).where(W.c.process_id == process_id)
        return [(r.name, r.correlation_key, r.action) for r in await self.session.execute(stmt)]
