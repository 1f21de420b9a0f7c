"""Log setup for the CLI and the server: human text by default, JSON lines on request.

`configure_logging()` installs ONE root handler on stderr:

- `STATEWARD_LOG_FORMAT=json`: one JSON object per line (`python-json-logger`) with
  `time`, `level`, `logger`, `message` and, when known, `request_id`, `trace_id`,
  `span_id`, `actor` and `operation` (see `observe.context`);
- otherwise (the default, meant for a terminal) `LEVEL logger: message`.

A server (`stateward serve`, and each worker of `serve --workers`) asks for
`batched=True`: the lines emitted on a thread running an event loop — one per GraphQL
operation, the access log — are written once per loop iteration (one `write` for every
request that finished in it) instead of one `write` and flush each; other threads' lines
are written at once, behind any line still waiting, so the order is kept; `flush()` (and
`logging.shutdown` at exit) writes what waits.

Log records never carry tokens, secrets or instance data: stateward's own messages name
ids and codes only, and as a second line of defence anything shaped like an API token
(`sw_…`) or a bearer credential is replaced by `[redacted]` before formatting. Alembic's
INFO lines (plugin setup, "Context impl SQLiteImpl", each migration) greet every start;
they are demoted to DEBUG and shown only with `STATEWARD_LOG_LEVEL=DEBUG`.
"""

from __future__ import annotations

import asyncio
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


class BatchingStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler writing the lines of an event loop's thread once per loop
    iteration (see the module docstring). `emit` runs under the handler's lock."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__(stream)
        self._pending: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except RecursionError:  # pragma: no cover - as logging.StreamHandler
            raise
        except Exception:
            self.handleError(record)
            return
        loop = asyncio._get_running_loop()
        if loop is None:
            self._write(line, record)
            return
        self._pending.append(line)
        if len(self._pending) == 1:
            loop.call_soon(self._drain)

    def _write(self, line: str, record: logging.LogRecord | None = None) -> None:
        pending = self._pending
        if pending:  # lines of the loop's thread waiting: they came first
            pending.append(line)
            line = "".join(pending)
            pending.clear()
        if not line:
            return
        try:
            self.stream.write(line)
            self.stream.flush()
        except RecursionError:  # pragma: no cover
            raise
        except Exception:
            self.handleError(record or logging.makeLogRecord({"msg": line}))

    def _drain(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._write("")

    def flush(self) -> None:
        """Write the lines still waiting, then flush the stream."""
        with self.lock:  # type: ignore[union-attr]
            self._write("")
        super().flush()


def log_format(env: dict[str, str] | None = None) -> str:
    """`json` or `text` from `STATEWARD_LOG_FORMAT` (anything else: `text`)."""
    value = (env if env is not None else os.environ).get(FORMAT_ENV, "").strip().lower()
    return "json" if value == "json" else "text"


def configure_logging(
    fmt: str | None = None,
    level: str | int | None = None,
    stream: IO[str] | None = None,
    *,
    batched: bool = False,
) -> logging.Handler:
    """Install the root handler (replacing one installed before); returns it. `batched`
    (servers): lines of an event loop's thread are written once per loop iteration."""
    chosen = fmt or log_format()
    wanted = level if level is not None else os.environ.get(LEVEL_ENV, "INFO")
    numeric = logging.getLevelName(wanted.upper()) if isinstance(wanted, str) else wanted
    if not isinstance(numeric, int):
        numeric = logging.INFO
    target = stream or sys.stderr
    handler = BatchingStreamHandler(target) if batched else logging.StreamHandler(target)
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
