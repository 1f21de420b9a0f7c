"""Log setup for the CLI and the server: human text by default, JSON lines on request.

`configure_logging()` installs ONE root handler on stderr:

- `STATEWARD_LOG_FORMAT=json`: one JSON object per line (`python-json-logger`) with
  `time`, `level`, `logger`, `message` and, when known, `request_id`, `trace_id`,
  `span_id`, `actor` and `operation` (see `observe.context`);
- otherwise (the default, meant for a terminal) `LEVEL logger: message`.

Log records never carry tokens, secrets or instance data: stateward's own messages name
ids and codes only, and as a second line of defence anything shaped like an API token
(`sw_…`) or a bearer credential is replaced by `[redacted]` before formatting. Alembic's
INFO lines (plugin setup, "Context impl SQLiteImpl", each migration) greet every start;
they are demoted to DEBUG and shown only with `STATEWARD_LOG_LEVEL=DEBUG`.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import IO, Any

from pythonjsonlogger.json import JsonFormatter

from stateward.observe import context

FORMAT_ENV = "STATEWARD_LOG_FORMAT"
LEVEL_ENV = "STATEWARD_LOG_LEVEL"
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
_TOKEN = re.compile(r"\bsw_[A-Za-z0-9_-]{8,}|(?i:\bbearer\s+)[^\s'\"]+")
_DEMOTED = ("alembic",)
_FIELDS = ("request_id", "trace_id", "span_id", "actor", "operation")


class _ContextFilter(logging.Filter):
    """Adds the request facts, redacts credentials, demotes alembic's chatter."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith(_DEMOTED) and record.levelno == logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        if record.levelno < self.level:
            return False
        for key, value in context.current().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        message = record.getMessage()
        redacted = _TOKEN.sub("[redacted]", message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


class _JsonFormatter(JsonFormatter):
    """`python-json-logger` with stateward's field names (time, level, logger, message)."""

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        for key in _FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                log_data[key] = value


def log_format(env: dict[str, str] | None = None) -> str:
    """`json` or `text` from `STATEWARD_LOG_FORMAT` (anything else: `text`)."""
    value = (env if env is not None else os.environ).get(FORMAT_ENV, "").strip().lower()
    return "json" if value == "json" else "text"


def configure_logging(
    fmt: str | None = None, level: str | int | None = None, stream: IO[str] | None = None
) -> logging.Handler:
    """Install the root handler (replacing one installed before); returns it."""
    chosen = fmt or log_format()
    wanted = level if level is not None else os.environ.get(LEVEL_ENV, "INFO")
    numeric = logging.getLevelName(wanted.upper()) if isinstance(wanted, str) else wanted
    if not isinstance(numeric, int):
        numeric = logging.INFO
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name("stateward")
    handler.addFilter(_ContextFilter(numeric))
    if chosen == "json":
        handler.setFormatter(
            _JsonFormatter(
                "{levelname}{name}{message}",
                style="{",
                rename_fields={"levelname": "level", "name": "logger"},
                timestamp="time",  # ISO 8601, UTC
                json_ensure_ascii=False,
            )
        )
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "stateward"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(min(numeric, logging.INFO))
    return handler
