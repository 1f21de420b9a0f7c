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


class CountingStream(io.StringIO):
    """A StringIO counting its writes (the system calls of a real stream)."""

    writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


async def test_a_servers_loop_lines_are_written_once_per_iteration() -> None:
    import asyncio
    import threading

    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    out = CountingStream()
    try:
        configure_logging("json", stream=out, batched=True)
        log = logging.getLogger("stateward.graphql")
        for n in range(3):
            log.info("request %d", n)
        assert out.getvalue() == ""  # waiting for the end of this loop iteration
        await asyncio.sleep(0)
        assert [line["message"] for line in lines(out)] == [f"request {n}" for n in range(3)]
        assert out.writes == 1
        # Another thread's line is written at once, behind the loop's waiting lines.
        log.info("loop line")
        worker = threading.Thread(target=lambda: log.warning("thread line"))
        worker.start()
        worker.join()
        assert [line["message"] for line in lines(out)][-2:] == ["loop line", "thread line"]
        # flush() (logging.shutdown at exit) writes what waits.
        log.info("last words")
        logging.getLogger().handlers[-1].flush()
        assert lines(out)[-1]["message"] == "last words"
        await asyncio.sleep(0)
        assert [line["message"] for line in lines(out)].count("last words") == 1
    finally:
        for handler in [h for h in root.handlers if h.get_name() == "stateward"]:
            root.removeHandler(handler)
        root.setLevel(level)
        assert [h for h in root.handlers if h not in handlers] == []


def test_serve_leaves_the_access_log_to_the_graphql_line() -> None:
    from stateward.commands.serve import uvicorn_options
    from stateward.settings import Settings

    assert uvicorn_options(Settings())["access_log"] is False
