"""JSON logs of real requests: one object per line, request facts, no token, no data."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from graph_stack import Api, loan

from stateward.observe.logs import configure_logging

DEPLOY = "mutation($d: JSON!) { addWorkflow(definition: $d) { path } }"
START = "mutation Start($w: String!, $d: JSON) { startInstance(workflow: $w, data: $d) { id } }"
SECRET_VALUE = "very-private-customer-value-31337"


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    level = root.level
    out = io.StringIO()
    handler = configure_logging("json", stream=out)
    yield out
    root.removeHandler(handler)
    root.setLevel(level)


async def test_json_log_lines_parse_and_hold_no_token_or_data(
    api: Api, json_log: io.StringIO
) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    await api.ok(START, {"w": "acme/loans/loan", "d": {"secret": SECRET_VALUE}})
    refused = await api.gql(START, {"w": "no/such/flow", "d": {"secret": SECRET_VALUE}})
    assert refused["errors"]
    text = json_log.getvalue()
    records = [json.loads(line) for line in text.splitlines()]
    assert records, "the operations were logged"
    mine = [r for r in records if r.get("operation") == "Start"]
    assert len(mine) == 2
    assert all(r["request_id"] and r["actor"] == api.admin.public for r in mine)
    assert {r["message"].split(": ")[1].split(" ")[0] for r in mine} == {"ok", "NOT_FOUND"}
    assert api.admin_token not in text
    assert SECRET_VALUE not in text
