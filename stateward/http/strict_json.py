"""Strict JSON for everything a client sends: HTTP bodies, GET `variables` and ws frames.

`json.loads` keeps the last of two equal keys, so a definition with two `review` states
was deployed, and 1,000 nested `[` raised RecursionError (HTTP 500, websocket 1006). Every
request is parsed with `loads_strict`, the loader the CLI uses for what it signs (duplicate
keys found in the raw text, nesting limited to 64, NaN/Infinity and unsafe integers
refused), and every string is checked for U+0000 and lone surrogates, which no database
column should receive. A failure is a `RequestJSONError` with a stable code and pointer:

- a duplicate key inside a variable that feeds a workflow `definition` argument is
  `DUPLICATE_KEY` with the pointer inside that definition (as `stateward validate` says);
- any other duplicate key, NUL or lone surrogate is `INVALID_INPUT` at its pointer in the
  request; malformed, too deep or unsafe JSON is `INVALID_JSON`.

HTTP answers 400; a websocket frame closes the socket with 4400 and the code as reason.
"""

from __future__ import annotations

import re
from typing import Any

from stateward.domain.canonical import check_canonicalizable, loads_strict
from stateward.domain.errors import DUPLICATE_KEY, INVALID_INPUT, DomainError

# A `\u0000` or `\uD800`-`\uDFFF` escape not itself escaped: only then are strings walked.
_SUSPECT = re.compile(r"(?<!\\)(?:\\\\)*\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")


class RequestJSONError(Exception):
    """A request's JSON was refused: `code`, `message`, `pointer` (RFC 6901, may be "")."""

    def __init__(self, code: str, message: str, pointer: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.pointer = pointer

    def as_error(self) -> dict[str, Any]:
        """The GraphQL-style error object `{message, extensions: {code, pointer?}}`."""
        ext: dict[str, Any] = {"code": self.code}
        if self.pointer:
            ext["pointer"] = self.pointer[:200]
        return {"message": self.message[:240], "extensions": ext}


def load_request_json(data: str | bytes) -> Any:
    """Parse a request body or frame strictly (see the module); RequestJSONError if refused."""
    try:
        value = loads_strict(data)
    except DomainError as err:
        if err.code == DUPLICATE_KEY:
            raise _duplicate(err.pointer, data) from err
        raise RequestJSONError(err.code, err.message, err.pointer) from err
    # `_SUSPECT` matches only escapes: without a backslash-u in the text it cannot match.
    if "\\u" not in data if isinstance(data, str) else b"\\u" not in data:
        return value
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    if _SUSPECT.search(text):
        try:
            check_canonicalizable(value)
        except DomainError as err:
            raise RequestJSONError(INVALID_INPUT, err.message, err.pointer) from err
    return value


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _duplicate(pointer: str, data: str | bytes) -> RequestJSONError:
    """DUPLICATE_KEY inside a definition variable, else INVALID_INPUT at `pointer`."""
    tokens = _tokens(pointer)
    key = tokens[-1] if tokens else ""
    message = f"key {key!r} appears more than once in the same object"
    if "variables" in tokens[:-1]:
        at = tokens.index("variables")
        name = tokens[at + 1] if at + 1 < len(tokens) else ""
        if name and _feeds_definition(data, name):
            inner = "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens[at + 2 :])
            return RequestJSONError(DUPLICATE_KEY, f"{message} (definition ${name})", inner)
    return RequestJSONError(INVALID_INPUT, message, pointer)


def _feeds_definition(data: str | bytes, name: str) -> bool:
    """True when the request's document passes `$name` as a `definition:` argument."""
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    return (
        re.search(rf"\bdefinition(?:\s|\\[nrt])*:(?:\s|\\[nrt])*\${re.escape(name)}\b", text)
        is not None
    )
