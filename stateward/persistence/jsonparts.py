"""The JSON text of instance data, reusing the text of top-level values that did not change.

An event usually changes a few small keys of an instance's data and leaves its large
values (a list of 800 records, a document) as they were: the engine copies the data on
write and shares every untouched value with the data it read (`domain/mutations.py`).
Dumping all of it again at every event cost ≈ 0.05–0.2 ms for 64 KB. `FragmentMemo`
remembers, per process, the text of each large top-level value with the value itself;
`dump` reuses that text when the new data holds the very same object (`is`), dumps the
other values, and joins the parts as orjson would: `{"key":value,...}` in insertion order
without spaces — the same text as `orjson.dumps(data)` (tests/persistence/test_jsonparts.py).

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

    def dump(self, process_id: str, data: dict[str, Any], last_size: int) -> str:
        """The JSON text of `data`, the new data of `process_id` (`last_size`: the length
        of its previous text, which decides whether parts are worth remembering).

        The text is made by ONE `str.join` of the parts and their punctuation: each
        intermediate string (a `key:value` part, the joined body, the braces added)
        would copy the 64 KB of a large value once more."""
        if orjson is None or last_size < LARGE or type(data) is not dict:
            return dumps_json(data)
        old = self._parts.get(process_id)
        known = old[0] if old is not None else {}
        pieces: list[str] = ["{"]
        remembered: dict[str, tuple[Any, str]] = {}
        size = 0
        try:
            for key, value in data.items():
                if type(key) is not str:
                    return dumps_json(data)
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
            return dumps_json(data)
        self._keep(process_id, remembered, size)
        if len(pieces) == 1:
            return "{}"
        pieces[-1] = "}"  # the last comma
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
