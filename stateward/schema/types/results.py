"""Small result types of mutations and checks: auth, validation, verification, actions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.types import Info
from strawberry.types.nodes import SelectedField

from stateward.domain.errors import Problem as DomainProblem
from stateward.records import ApiTokenRecord, NotificationRecord
from stateward.resolvers.ids import to_global_id
from stateward.schema.enums import NotificationKind
from stateward.schema.scalars import JSON
from stateward.schema.types.instance import Event, Instance
from stateward.schema.types.node import Node


@strawberry.type
class Problem:
    """A validation finding: stable code, message, RFC 6901 pointer."""

    code: str
    message: str
    pointer: str

    @classmethod
    def from_domain(cls, problem: DomainProblem) -> Problem:
        """The wire form of a domain `Problem`."""
        return cls(code=problem.code, message=problem.message, pointer=problem.pointer)


@strawberry.type
class ValidationReport:
    """The outcome of validating a definition: every error and warning."""

    valid: bool
    errors: list[Problem]
    warnings: list[Problem]
    hash: str | None = None

    @classmethod
    def from_domain(cls, report: Any) -> ValidationReport:
        """From `domain.definition.ValidationReport`."""
        definition = report.definition
        return cls(
            valid=report.valid,
            errors=[Problem.from_domain(p) for p in report.errors],
            warnings=[Problem.from_domain(p) for p in report.warnings],
            hash=definition.hash if definition is not None else None,
        )


@strawberry.type
class VerificationProblem:
    """One finding of `verifyProcess`: process, seq (0 = the process), code, message."""

    process: str
    seq: int
    code: str
    message: str


@strawberry.type
class Verification:
    """Signatures, hash chain and replay of one process's log."""

    valid: bool
    events_checked: int
    problems: list[VerificationProblem]

    @classmethod
    def from_domain(cls, report: Any) -> Verification:
        """From `runtime.verify.VerificationReport`."""
        return cls(
            valid=report.valid,
            events_checked=report.events_checked,
            problems=[
                VerificationProblem(process=p.process, seq=p.seq, code=p.code, message=p.message)
                for p in report.problems
            ],
        )


@strawberry.type
class ActionResult:
    """What an event did: the instance after it, the stored event, and whether it was a
    resubmission of an event already in the log."""

    instance: Instance
    event: Event
    duplicate: bool

    @classmethod
    def from_domain(cls, result: Any) -> ActionResult:
        """From `runtime.act.ActResult`."""
        return cls(
            instance=Instance.from_record(result.record),
            event=Event.from_record(result.event),
            duplicate=result.duplicate,
        )


@strawberry.type
class SubmittedEvent:
    """One item of `submitEvents`: its result, or why it was refused (nothing of it
    was applied then; `error.pointer` starts with `/events/<index>`)."""

    index: int
    result: ActionResult | None
    error: Problem | None
    #: A plain attribute, not a resolver: 100 items' `duplicate` are then completed by
    #: `schema/leaves.py` without graphql-core's per-field machinery.
    duplicate: bool = strawberry.field(description="True when the event was already in the log.")

    @classmethod
    def answers(cls, info: Info, outcomes: list[tuple[Any, Any]]) -> list[SubmittedEvent]:
        """Each item's answer from its (ActResult, None) or (None, domain Problem). The
        `result` objects (an instance and an event each) are built only when the
        operation selects `result`: a bulk load asking for `duplicate error{code}` had
        them built and dropped, ≈ 3 % of the event loop per event (issue 18)."""
        full = _selects(info, "result")
        return [
            cls(
                index=n,
                result=ActionResult.from_domain(outcome) if full and error is None else None,
                error=Problem.from_domain(error) if error is not None else None,
                duplicate=error is None and bool(outcome.duplicate),
            )
            for n, (outcome, error) in enumerate(outcomes)
        ]


def _selects(info: Info, name: str) -> bool:
    """Whether the field being resolved selects `name` in any of its selections (a
    fragment counts as selecting it: never less than asked for)."""
    for field in info.selected_fields:
        for selection in field.selections:
            if not isinstance(selection, SelectedField) or selection.name == name:
                return True
    return False


@strawberry.type
class Challenge:
    """A single-use login challenge: sign its UTF-8 bytes and send them to authLogin."""

    challenge: str
    expires_at: datetime


@strawberry.type
class Session:
    """A bearer token opened by a challenge-response login."""

    token: str
    actor: str
    expires_at: datetime


@strawberry.type
class ApiToken:
    """A bearer token for scripts (shown once; only its hash is stored)."""

    token: str
    label: str | None
    actor: str
    expires_at: datetime | None


@strawberry.type(description="One of the viewer's API tokens, without its secret.")
class ApiTokenInfo:
    id: strawberry.ID = strawberry.field(
        description="The token's id (the sha256 of the secret, which is never stored)."
    )
    label: str | None = strawberry.field(description="The label given when it was created.")
    created_at: datetime = strawberry.field(description="When it was created.")
    expires_at: datetime | None = strawberry.field(description="When it stops working.")
    revoked_at: datetime | None = strawberry.field(description="When it was revoked, if so.")
    active: bool = strawberry.field(description="Neither revoked nor expired now.")

    @classmethod
    def from_record(cls, record: ApiTokenRecord, now: datetime) -> ApiTokenInfo:
        """The token row `record`, judged at `now`."""
        return cls(
            id=strawberry.ID(record.token_hash), label=record.label,
            created_at=record.created_at, expires_at=record.expires_at,
            revoked_at=record.revoked_at, active=record.valid_at(now),
        )  # fmt: skip


@strawberry.type
class Notification(Node):
    """A message for the viewer or one of its teams (e.g. an SLA breach)."""

    notification_id: int
    recipient: str
    namespace: str
    instance_id: str | None
    kind: NotificationKind
    payload: JSON
    created_at: datetime
    read_at: datetime | None

    @classmethod
    def from_record(cls, record: NotificationRecord) -> Notification:
        """The notification row `record`."""
        return cls(
            id=strawberry.ID(to_global_id("Notification", str(record.id))),
            notification_id=record.id, recipient=record.recipient,
            namespace=record.namespace, instance_id=record.process_id,
            kind=NotificationKind(record.kind), payload=record.payload,
            created_at=record.created_at, read_at=record.read_at,
        )  # fmt: skip
