"""The JSON text of instance data, reusing the text of top-level values that did not change.

An event usually changes a few small keys of an instance's data and leaves its large
values (a list of 800 records, a document) as they were: the engine copies the data on
write and shares every untouched value with the data it read (`domain/mutations.py`).
Dumping all of it again at every event cost ≈ 0.05–0.2 ms for 64 KB. `FragmentMemo`
remembers, per process, the text of each large top-level value with the value itself;
`dump` reuses that text when the new data holds the very same object (`is`), dumps the
other values, and joins the parts as orjson would: `{"key":value,...}` in insertion order
without spaces — the same text as `orjson.dumps(data)` (tests/persistence/test_jsonparts.py).

On SQLite large data is also stored with trailing spaces (`padded_length`, JSON allows
whitespace after the value; PostgreSQL's jsonb drops it, so nothing is padded there). An
edit that changes the text's length by a little then keeps the row's length, and SQLite
overwrites a row of the same length in place, writing only the pages whose bytes
changed (one or two of a 64 KB row's 18); a row whose length changes is written again
whole, every overflow page a new WAL frame (≈ 95 KB of WAL per event on 64 KB, the
SQLite thread's CPU ≈ 4×: docs/performance.md, `pad18`).

Sound because nothing mutates process data in place (the rule the `DataCache` already
relies on: `persistence/processes.py`), so an object's text stays its text while the memo
holds the object (which also keeps its `id` from being reused). Data smaller than
`LARGE` bytes, non-string keys and values orjson refuses take the plain path
(`db.dumps_json`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from stateward.persistence.db import dumps_json

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a dependency; the plain path works
    orjson = None  # type: ignore[assignment]

#: Data whose last JSON text was shorter than this is dumped whole (one orjson call).
LARGE = 8 * 1024
#: Top-level values whose text is at least this long are remembered.
PART_MIN = 1024
#: Bytes of remembered text per memo (one per runtime, beside the `DataCache`).
MEMO_BYTES = 16 * 1024 * 1024
#: Padding of large data (SQLite): blocks of 1/`PAD_SHARE` of the text, at least
#: `PAD_MIN` characters (≈ 1.6 % of a 64 KB text, at most two blocks spare).
PAD_SHARE = 64
PAD_MIN = 256


def padded_length(length: int, previous: int) -> int:
    """The length to store a JSON text of `length` characters at, the row's text having
    been `previous` long (0: new): text shorter than `LARGE` as it is; else `previous`
    while the text fits it with less than two blocks to spare (an edit that keeps the
    length keeps the row's, and a value toggling around a block's edge does not move
    it), else rounded up to a whole block."""
    if length < LARGE:
        return length
    block = max(PAD_MIN, length // PAD_SHARE)
    if length <= previous < length + 2 * block:
        return previous
    return -(-length // block) * block


def padded(text: str, previous: int) -> str:
    """`text` with the trailing spaces `padded_length` asks for (a copy only then)."""
    spare = padded_length(len(text), previous) - len(text)
    return text + " " * spare if spare else text


def dump_whole(data: Any, previous: int, *, pad: bool) -> str:
    """One `dumps_json` of `data`, padded (`padded`, after a text `previous` long) when
    `pad`: the text of data whose parts are not worth remembering."""
    text = dumps_json(data)
    return padded(text, previous) if pad else text


class FragmentMemo:
    """Per process id: {key: (value, its JSON text)} for large top-level values, least
    recently used processes dropped past `budget` bytes of text."""

    def __init__(self, budget: int = MEMO_BYTES) -> None:
        self.budget = budget
        self._parts: OrderedDict[str, tuple[dict[str, tuple[Any, str]], int]] = OrderedDict()
        self._size = 0
        #: Top-level values whose text was reused / dumped by `dump` (tests and benches).
        self.reused = 0
        self.dumped = 0

    def dump(
        self, process_id: str, data: dict[str, Any], last_size: int, *, pad: bool = False
    ) -> str:
        """The JSON text of `data`, the new data of `process_id` (`last_size`: the length
        of its previous text, which decides whether parts are worth remembering), with
        `pad` the spaces `padded_length` adds (SQLite).

        The text is made by ONE `str.join` of the parts and their punctuation (and the
        padding): each intermediate string (a `key:value` part, the joined body, the
        braces added) would copy the 64 KB of a large value once more."""
        if orjson is None or last_size < LARGE or type(data) is not dict:
            return dump_whole(data, last_size, pad=pad)
        old = self._parts.get(process_id)
        known = old[0] if old is not None else {}
        pieces: list[str] = ["{"]
        remembered: dict[str, tuple[Any, str]] = {}
        size = 0
        try:
            for key, value in data.items():
                if type(key) is not str:
                    return dump_whole(data, last_size, pad=pad)
                hit = known.get(key)
                if hit is not None and hit[0] is value:
                    text = hit[1]
                    self.reused += 1
                else:
                    text = orjson.dumps(value).decode()
                    self.dumped += 1
                if len(text) >= PART_MIN and type(value) in (dict, list):
                    remembered[key] = (value, text)
                    size += len(text)
                pieces += (orjson.dumps(key).decode(), ":", text, ",")
        except TypeError:  # a value orjson refuses (an integer past 64 bits)
            return dump_whole(data, last_size, pad=pad)
        self._keep(process_id, remembered, size)
        if len(pieces) == 1:
            return dump_whole(data, last_size, pad=pad)
        pieces[-1] = "}"  # the last comma
        if pad:
            length = sum(map(len, pieces))
            spare = padded_length(length, last_size) - length
            if spare:
                pieces.append(" " * spare)
        return "".join(pieces)

    def _keep(self, process_id: str, parts: dict[str, tuple[Any, str]], size: int) -> None:
        old = self._parts.pop(process_id, None)
        if old is not None:
            self._size -= old[1]
        if not parts or size > self.budget:
            return
        self._parts[process_id] = (parts, size)
        self._size += size
        while self._size > self.budget:
            _, (_, dropped) = self._parts.popitem(last=False)
            self._size -= dropped

    def __len__(self) -> int:
        return len(self._parts)
