"""`idempotencyKey` on every write mutation: one field extension adds the argument and
runs the resolver with the key in effect (`runtime/idempotency.py` derives the nonces).

Retrying a mutation after a timeout with the same key is safe: it answers the original
event (`duplicate: true`) when the first try was applied, and applies it otherwise; the
same key with other content is `REPLAYED`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from strawberry.annotation import StrawberryAnnotation
from strawberry.extensions import FieldExtension
from strawberry.types import Info
from strawberry.types.arguments import StrawberryArgument
from strawberry.types.field import StrawberryField

from stateward.runtime.core.idempotency import keyed

ARGUMENT = "idempotency_key"
DESCRIPTION = (
    "Makes the write safe to retry: the same key again answers the original event "
    "(duplicate: true) if the first try was applied; the same key with other content "
    "is REPLAYED. Use a fresh key (e.g. a UUID) per intended change."
)


class IdempotencyKey(FieldExtension):
    """Adds `idempotencyKey: String` to a mutation and keys the writes it makes."""

    def apply(self, field: StrawberryField) -> None:
        if any(a.python_name == ARGUMENT for a in field.arguments):
            return  # the schema is built more than once (tests): add it once
        argument = StrawberryArgument(
            python_name=ARGUMENT,
            graphql_name=None,
            type_annotation=StrawberryAnnotation(str | None),  # type: ignore[arg-type]
            default=None,
            description=DESCRIPTION,
        )
        field.arguments = [*field.arguments, argument]

    async def resolve_async(  # type: ignore[override]  # positional-only, see below
        self, next_: Callable[..., Awaitable[Any]], root: Any, info: Info, /, **kwargs: Any
    ) -> Any:
        # Positional-only: mutations have arguments named `source` and `info`-like names.
        key = kwargs.pop(ARGUMENT, None)
        with keyed(key):
            return await next_(root, info, **kwargs)


def add_to(mutation_type: type, *, skip: frozenset[str]) -> None:
    """Put `IdempotencyKey` on every field of `mutation_type` except `skip` (python names)."""
    definition = mutation_type.__strawberry_definition__  # type: ignore[attr-defined]
    for field in definition.fields:
        if field.python_name not in skip and not any(
            isinstance(e, IdempotencyKey) for e in field.extensions
        ):
            field.extensions.append(IdempotencyKey())
