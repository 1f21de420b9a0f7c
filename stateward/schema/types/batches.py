"""Bulk operations (issue 15): `BatchOperation` and its errors."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry.types import Info

from stateward.records import BatchItemRecord, BatchRecord
from stateward.resolvers import batches
from stateward.resolvers.ids import to_global_id
from stateward.schema.enums import BatchKind, BatchStatus
from stateward.schema.scalars import JSON
from stateward.schema.types.connection import Connection
from stateward.schema.types.node import Node


@strawberry.type(description="One instance a bulk operation could not apply to, and why.")
class BatchError:
    instance_id: str
    code: str
    message: str

    @classmethod
    def from_record(cls, item: BatchItemRecord) -> BatchError:
        """From a failed item."""
        return cls(instance_id=item.process_id, code=item.code or "", message=item.message or "")


@strawberry.type(description="A bulk operation over the instances a filter matched.")
class BatchOperation(Node):
    id: strawberry.ID
    batch_id: str
    kind: BatchKind = strawberry.field(description="What it does to each instance.")
    filter: JSON = strawberry.field(description="The filter, as given (set fields only).")
    params: JSON = strawberry.field(description="reason / toVersion, stateMap / action, input.")
    status: BatchStatus = strawberry.field(description="Where it is.")
    total: int = strawberry.field(description="Instances the filter matched at creation.")
    succeeded: int
    failed: int
    created_by: str
    created_at: datetime
    finished_at: datetime | None
    _record: strawberry.Private[BatchRecord]

    @strawberry.field(description="The instances it failed on, with the reason.")
    async def errors(
        self, info: Info, first: int | None = None, after: str | None = None,
        last: int | None = None, before: str | None = None,
    ) -> Connection[BatchError]:  # fmt: skip
        page = await batches.errors(info, self._record, first, after, last, before)
        return Connection.of(page, BatchError.from_record)

    @classmethod
    def from_record(cls, record: BatchRecord) -> BatchOperation:
        """From the batch row."""
        return cls(
            id=strawberry.ID(to_global_id("BatchOperation", record.id)), batch_id=record.id,
            kind=BatchKind(record.kind), filter=record.filter, params=record.params,
            status=BatchStatus(record.status),
            total=record.total, succeeded=record.succeeded, failed=record.failed,
            created_by=record.created_by, created_at=record.created_at,
            finished_at=record.finished_at, _record=record,
        )  # fmt: skip
