"""Relay global ids and the generic connection helper."""

from __future__ import annotations

import base64
import json

import pytest

from stateward.domain.errors import DomainError
from stateward.resolvers.ids import from_global_id, local_id, to_global_id, try_global_id
from stateward.schema.types.connection import Connection, decode_cursor, encode_cursor


def test_a_global_id_round_trips_its_type_and_local_id() -> None:
    ident = to_global_id("Workflow", "acme/loans/loan@3")
    assert from_global_id(ident) == ("Workflow", "acme/loans/loan@3")


def test_a_raw_uuid_is_not_taken_for_a_global_id() -> None:
    uuid = "0d77d4b7-dbdd-4bde-903e-a670ccb280a0"
    assert try_global_id(uuid) is None
    assert local_id(uuid, "Instance") == uuid


def test_a_global_id_of_another_type_is_refused() -> None:
    with pytest.raises(DomainError) as caught:
        local_id(to_global_id("Assignment", "x"), "Instance")
    assert caught.value.code == "INVALID_INPUT"


def test_a_list_pages_by_cursor_without_gaps_or_repeats() -> None:
    items = list(range(7))
    seen: list[int] = []
    after = None
    while True:
        page: Connection[int] = Connection.from_list(items, 3, after, key=lambda i: (i,))
        seen += [e.node for e in page.edges]
        if not page.page_info.has_next_page:
            break
        after = page.page_info.end_cursor
    assert seen == items


def test_a_garbled_cursor_is_invalid_input() -> None:
    assert decode_cursor(encode_cursor([1, "a"])) == [1, "a"]
    with pytest.raises(DomainError) as caught:
        decode_cursor("%%%")
    assert caught.value.code == "INVALID_INPUT"


@pytest.mark.parametrize(
    "values", [[1], [0], [-5], [2**70], [3, 4], [], [True], [1.5], [None], ["a", 1], ["é"]]
)
def test_a_cursor_is_the_base64_of_its_compact_json(values: list[object]) -> None:
    """The all-integer shortcut (issue 16) writes what `json.dumps` writes."""
    text = json.dumps(values, separators=(",", ":"), default=str)
    assert encode_cursor(values) == base64.urlsafe_b64encode(text.encode()).decode("ascii")
    assert decode_cursor(encode_cursor(values)) == values


def test_every_notification_kind_the_kernel_stores_is_a_value_of_the_api_enum():
    from stateward.domain.events import NOTIFICATION_KINDS
    from stateward.schema.enums import NotificationKind

    assert {kind.value for kind in NotificationKind} == NOTIFICATION_KINDS
