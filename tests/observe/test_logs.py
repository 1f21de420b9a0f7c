"""Log setup: JSON lines or text, credentials redacted, alembic's greeting demoted."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from stateward.observe import context
from stateward.observe.logs import configure_logging, log_format


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    out = io.StringIO()
    yield out
    for handler in [h for h in root.handlers if h.get_name() == "stateward"]:
        root.removeHandler(handler)
    root.setLevel(level)
    assert [h for h in root.handlers if h not in handlers] == []


def lines(out: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_the_format_comes_from_stateward_log_format() -> None:
    assert log_format({"STATEWARD_LOG_FORMAT": "json"}) == "json"
    assert log_format({"STATEWARD_LOG_FORMAT": "JSON "}) == "json"
    assert log_format({}) == "text"
    assert log_format({"STATEWARD_LOG_FORMAT": "xml"}) == "text"


def test_json_lines_carry_level_logger_message_and_request_facts(stream: io.StringIO) -> None:
    configure_logging("json", stream=stream)
    token = context.request_id.set("req-1")
    try:
        logging.getLogger("stateward.test").warning("claimed %s", "a-1")
    finally:
        context.request_id.reset(token)
    (line,) = lines(stream)
    assert line["level"] == "WARNING" and line["logger"] == "stateward.test"
    assert line["message"] == "claimed a-1" and line["request_id"] == "req-1"
    assert "time" in line


def test_tokens_and_bearer_credentials_are_redacted(stream: io.StringIO) -> None:
    configure_logging("json", stream=stream)
    log = logging.getLogger("stateward.test")
    log.warning("token %s refused", "sw_abcdefghijklmnopqrstuvwxyz0123")
    log.warning("header was Authorization: Bearer abc.def.ghi")
    text = stream.getvalue()
    assert "sw_abcdefghijklmnopqrstuvwxyz0123" not in text and "abc.def.ghi" not in text
    assert [line["message"] for line in lines(stream)] == [
        "token [redacted] refused",
        "header was Authorization: [redacted]",
    ]


def test_alembic_info_goes_to_debug_level(stream: io.StringIO) -> None:
    configure_logging("text", stream=stream)
    logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
    logging.getLogger("alembic.runtime.migration").warning("something odd")
    assert stream.getvalue() == "WARNING alembic.runtime.migration: something odd\n"
    configure_logging("text", level="DEBUG", stream=stream)
    logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
    assert stream.getvalue().endswith("DEBUG alembic.runtime.migration: Context impl SQLiteImpl.\n")
