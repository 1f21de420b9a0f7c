"""Parse a definition's raw JSON text, locating every duplicate key by its JSON pointer.

`json.loads` keeps the last of two equal keys silently; a workflow with two `review` states
must be rejected instead (DESIGN §2.2), and the author needs to know where. The parser marks
objects that held duplicates while they are built (bottom-up, so their pointer is not known
yet) and a walk afterwards turns the marks into DUPLICATE_KEY problems with pointers.

Nesting is limited to `MAX_JSON_DEPTH` (64, like the expression limit) and checked on the
text before parsing, so 1,000 nested `[` are a clear INVALID_JSON, never a RecursionError
in the parser or in any code that walks the value later.
"""

from __future__ import annotations

import json
from typing import Any

from stateward.domain import errors
from stateward.domain.canonical import MAX_JSON_DEPTH, check_canonicalizable, nesting_exceeds
from stateward.domain.errors import DomainError, Problem
from stateward.domain.mutations import pointer_join


class _Object(dict[str, Any]):
    """A parsed JSON object that remembers which of its keys appeared more than once."""

    duplicates: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj and key not in obj.duplicates:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _plain(value: Any, pointer: str, found: list[Problem]) -> Any:
    """Turn marked objects back into plain dicts, reporting their duplicate keys."""
    if isinstance(value, _Object):
        for key in value.duplicates:
            found.append(
                Problem(
                    errors.DUPLICATE_KEY,
                    f"key {key!r} appears more than once in the same object",
                    pointer_join(pointer, key),
                )
            )
        return {k: _plain(v, pointer_join(pointer, k), found) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, pointer_join(pointer, str(i)), found) for i, v in enumerate(value)]
    return value


def parse_json_text(text: str) -> tuple[Any, list[Problem]]:
    """Parse JSON text; return (value, problems).

    On a syntax error the value is None and the only problem is INVALID_JSON (line, column
    and character offset in the message). Otherwise every duplicate key anywhere is a
    DUPLICATE_KEY problem at the duplicate's pointer (the last occurrence's value is kept so
    validation can go on and report everything else too).
    """
    if nesting_exceeds(text):
        message = f"not valid JSON: nested deeper than {MAX_JSON_DEPTH} levels"
        return None, [Problem(errors.INVALID_JSON, message, "")]
    try:
        raw = json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno} (char {exc.pos})"
        return None, [Problem(errors.INVALID_JSON, f"not valid JSON at {where}: {exc.msg}", "")]
    except (ValueError, RecursionError) as exc:
        reason = str(exc)
        if "integer string conversion" in reason:  # int() refuses > 4,300 digits
            reason = "a number has too many digits"
        return None, [Problem(errors.INVALID_JSON, f"not valid JSON: {reason}"[:200], "")]
    found: list[Problem] = []
    return _plain(raw, "", found), found


def unrepresentable(value: Any) -> list[Problem]:
    """An INVALID_JSON problem, at its pointer, for the first value RFC 8785 cannot represent.

    NaN, ±Infinity, integers beyond ±(2^53 - 1), non-string keys and non-JSON types have
    no canonical form, so a definition holding one can have no hash.
    """
    try:
        check_canonicalizable(value)
    except DomainError as exc:
        return [Problem(errors.INVALID_JSON, exc.message, exc.pointer)]
    return []
