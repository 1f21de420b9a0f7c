"""Relay global ids: `base64("Type:local id")`, and the arguments that accept either form.

Every `Node` exposes `id` as a global id so a client can refetch any object with
`node(id)`. Arguments named `instance`/`id` accept the raw local id (a UUID for an
instance) or the global id; `local_id` tells them apart.
"""

from __future__ import annotations

import base64
import binascii

from stateward.domain.errors import INVALID_INPUT, DomainError


def to_global_id(type_name: str, local_id: str) -> str:
    """The Relay global id of the object `local_id` of GraphQL type `type_name`."""
    return base64.b64encode(f"{type_name}:{local_id}".encode()).decode("ascii")


def from_global_id(global_id: str) -> tuple[str, str]:
    """(type name, local id) of a global id; INVALID_INPUT when it is not one."""
    parsed = try_global_id(global_id)
    if parsed is None:
        raise DomainError(INVALID_INPUT, f"{global_id!r} is not a node id", pointer="/id")
    return parsed


def try_global_id(value: str) -> tuple[str, str] | None:
    """(type name, local id) when `value` decodes as a global id, else None."""
    if not value or len(value) % 4 or not value.isascii():
        return None
    try:
        text = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    type_name, sep, local = text.partition(":")
    if not sep or not local or not type_name.isidentifier() or not type_name[0].isupper():
        return None
    return type_name, local


def local_id(value: str, type_name: str) -> str:
    """The local id named by `value`: a raw id, or a global id of `type_name`.

    A global id of another type is INVALID_INPUT (asking for an Instance with an
    Assignment's id is a client bug worth reporting, not a NOT_FOUND).
    """
    parsed = try_global_id(value)
    if parsed is None:
        return value
    found_type, local = parsed
    if found_type != type_name:
        raise DomainError(
            INVALID_INPUT,
            f"expected the id of a {type_name}, got the id of a {found_type}",
            pointer="/id",
        )
    return local
