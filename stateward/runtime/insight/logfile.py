"""The exported deployment log (`stateward.log/1`, JSON Lines): write and read.

Line 1 is the header `{"format": "stateward.log/1", "net", "size", "root",
"legacy_nodes"}`; then one line per event in log-index order
`{"index", "process", "seq", "action", "version", "signer", "signature", "prev_hash",
"hash", "envelope"}` (`envelope`: the exact RFC 8785 text that was signed; `action`: the
stored action name, which differs from the envelope's for `$advance`; `version`: the
workflow version the process pinned, on its first event only); each kept checkpoint
`{"checkpoint": {...}, "signer", "signature"}` follows the event that completed its
tree (checkpoints of the empty tree follow the header). docs/log-format.md has the rest.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.logformat import LOG_FORMAT
from stateward.domain.migration import MIGRATE
from stateward.governance.checkpoint import SignedCheckpoint, parse_checkpoint
from stateward.records import StoredEvent
from stateward.runtime.core.services import Runtime, legacy_nodes

PAGE = 2000
EVENT_KEYS = frozenset(
    {"index", "process", "seq", "action", "version", "signer", "signature", "prev_hash",
     "hash", "envelope"}
)  # fmt: skip


@dataclass(frozen=True)
class LogEvent:
    """One exported event (see the module docstring)."""

    index: int
    process: str
    seq: int
    action: str
    version: int | None
    signer: str
    signature: str
    prev_hash: str
    hash: str
    envelope: str

    def to_json(self) -> dict[str, Any]:
        """The JSON line object."""
        return {
            "index": self.index,
            "process": self.process,
            "seq": self.seq,
            "action": self.action,
            "version": self.version,
            "signer": self.signer,
            "signature": self.signature,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
            "envelope": self.envelope,
        }


@dataclass
class LogFile:
    """A parsed export: header facts, events in file order, checkpoints in file order."""

    net: str
    #: Node keys trusted before trust was governed (migration 0009); files written
    #: before that call the list `trusted_signers`.
    legacy_nodes: frozenset[str]
    events: list[LogEvent] = field(default_factory=list)
    checkpoints: list[SignedCheckpoint] = field(default_factory=list)
    size: int = 0
    root: str = ""


def event_line(index: int, event: StoredEvent, version: int | None) -> LogEvent:
    """The exported form of a stored event."""
    return LogEvent(
        index=index,
        process=event.process_id,
        seq=event.seq,
        action=event.action,
        version=version,
        signer=event.signer,
        signature=event.signature,
        prev_hash=event.prev_hash or "0" * 64,
        hash=event.hash,
        envelope=event.envelope,
    )


async def export_lines(runtime: Runtime) -> AsyncIterator[dict[str, Any]]:
    """Every line of the export, in order (one read transaction, paged)."""
    async with runtime.uow(readonly=True) as uow:
        legacy = sorted(await legacy_nodes(uow))
        size, root = await uow.log.head()
        yield {
            "format": LOG_FORMAT,
            "net": runtime.net,
            "size": size,
            "root": root,
            "legacy_nodes": legacy,
        }
        checkpoints = sorted(await uow.log.checkpoints(), key=lambda c: (c.size, c.id or 0))
        pending = [c for c in checkpoints if c.size <= size]
        while pending and pending[0].size == 0:
            yield pending.pop(0).as_json()
        after = -1
        while True:
            rows = await uow.log.events(after=after, limit=PAGE)
            if not rows:
                break
            firsts = [e.process_id for _i, e in rows if e.seq == 1]
            versions = await uow.processes.processes_by_ids(firsts)
            # a migrated instance started on the version its first `$migrate` left
            migrated = await uow.events.first_of_action(firsts, MIGRATE)
            for index, event in rows:
                pinned = versions.get(event.process_id) if event.seq == 1 else None
                version = pinned.workflow_version if pinned else None
                moved = migrated.get(event.process_id) if pinned else None
                if moved is not None and isinstance(moved.input.get("fromVersion"), int):
                    version = int(moved.input["fromVersion"])
                yield event_line(index, event, version).to_json()
                while pending and pending[0].size == index + 1:
                    yield pending.pop(0).as_json()
            after = rows[-1][0]


def _bad(line: int, message: str) -> DomainError:
    return DomainError(INVALID_INPUT, f"log line {line}: {message}", pointer=f"/{line}")


def _event(line: int, obj: dict[str, Any]) -> LogEvent:
    if obj.keys() != EVENT_KEYS:
        raise _bad(line, f"an event line has exactly the keys {sorted(EVENT_KEYS)}")
    version = obj["version"]
    if (
        type(obj["index"]) is not int
        or type(obj["seq"]) is not int
        or type(obj["process"]) is not str
        or type(obj["action"]) is not str
        or type(obj["signer"]) is not str
        or type(obj["signature"]) is not str
        or type(obj["prev_hash"]) is not str
        or type(obj["hash"]) is not str
        or type(obj["envelope"]) is not str
        or (version is not None and type(version) is not int)
    ):
        return _event_types(line, obj)
    # The parsed line is exactly the fields: it becomes the event's attributes as it is
    # (a frozen dataclass's __init__ costs ≈ 2 µs of a 20k-event verify's few per line).
    event: LogEvent = object.__new__(LogEvent)
    object.__setattr__(event, "__dict__", obj)
    return event


def _event_types(line: int, obj: dict[str, Any]) -> LogEvent:
    """The type errors of an event line (JSON values: `bool` is not an integer)."""
    for key in ("index", "seq"):
        if isinstance(obj[key], bool) or not isinstance(obj[key], int):
            raise _bad(line, f"{key} must be an integer")
    for key in ("process", "action", "signer", "signature", "prev_hash", "hash", "envelope"):
        if not isinstance(obj[key], str):
            raise _bad(line, f"{key} must be a string")
    version = obj["version"]
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise _bad(line, "version must be an integer or null")
    return LogEvent(**obj)  # pragma: no cover - only reached for well-typed lines


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused for a bulk pass over a log: parsing and
    verifying allocate a few containers per event and keep most of them, so every
    collection would walk the whole, growing log again (≈ 3 µs per event on 20k events,
    as much as parsing the line). Nothing those passes build is cyclic; reference
    counting frees it. The collector's state is restored after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_lines(lines: Iterable[str | bytes]) -> LogFile:
    """Parse an export (INVALID_INPUT naming the line for anything malformed)."""
    with no_gc():
        return _parse_lines(lines)


def _parse_lines(lines: Iterable[str | bytes]) -> LogFile:
    log: LogFile | None = None
    for number, text in enumerate(lines, start=1):
        if not text or text.isspace():
            continue
        try:
            obj = orjson.loads(text)
        except ValueError as exc:
            raise _bad(number, f"not JSON ({exc})") from exc
        if not isinstance(obj, dict):
            raise _bad(number, "not a JSON object")
        if log is None:
            if obj.get("format") != LOG_FORMAT or not isinstance(obj.get("net"), str):
                raise _bad(number, f"the first line must be the {LOG_FORMAT} header")
            legacy = obj.get("legacy_nodes", obj.get("trusted_signers")) or []
            if not isinstance(legacy, list):
                raise _bad(number, "legacy_nodes must be a list of node keys")
            log = LogFile(
                net=obj["net"],
                legacy_nodes=frozenset(t for t in legacy if isinstance(t, str)),
                size=int(obj.get("size") or 0),
                root=str(obj.get("root") or ""),
            )
        elif "checkpoint" in obj:
            try:
                log.checkpoints.append(parse_checkpoint(obj))
            except DomainError as exc:
                raise _bad(number, exc.message) from exc
        else:
            log.events.append(_event(number, obj))
    if log is None:
        raise _bad(1, "the log is empty (no header)")
    return log


def read_log(path: str) -> LogFile:
    """Parse the export file at `path` (bytes: orjson checks the UTF-8 itself)."""
    with open(path, "rb") as handle:
        return parse_lines(handle.read().split(b"\n"))
