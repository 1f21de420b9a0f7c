"""Canonical JSON (RFC 8785 / JCS), strict JSON parsing and sha256 — pure functions.

Everything that is hashed or signed goes through `canonical_bytes`: a definition's version
hash, an event envelope's identity and the bytes an Ed25519 signature covers. RFC 8785
cannot represent NaN, ±Infinity, integers outside the IEEE-754 safe range or non-string
keys, so those are rejected here with a pointer to the offending value instead of being
silently rounded or coerced. `loads_strict` is the matching parser: it refuses what JSON
or JCS cannot carry faithfully (NaN/Infinity literals, numbers that overflow a double,
unsafe integers) and duplicate object keys — before any signature is ever checked.

Strings may not hold U+0000: PostgreSQL cannot store it in text or jsonb, so it is refused
on every database (a SQLite log never holds what a PostgreSQL node could not replay).
JSON nesting is limited to `MAX_JSON_DEPTH` levels, checked on the text before parsing.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import orjson
import rfc8785

from stateward.domain.errors import DUPLICATE_KEY, INVALID_INPUT, INVALID_JSON, DomainError

#: Largest integer magnitude accepted: Number.MAX_SAFE_INTEGER (2^53 - 1), as in `rfc8785`.
MAX_SAFE_INTEGER = 2**53 - 1
#: Longest integer literal parsed (the largest double, ~1.8e308, has 309 digits).
_MAX_INT_DIGITS = 309


def escape_pointer_token(token: str | int) -> str:
    """One RFC 6901 reference token: `~` -> `~0`, `/` -> `~1`."""
    return str(token).replace("~", "~0").replace("/", "~1")


def _child(pointer: str, token: str | int) -> str:
    return f"{pointer}/{escape_pointer_token(token)}"


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _bad_string(text: str, where: str, what: str) -> DomainError | None:
    """INVALID_INPUT for a string that is not valid Unicode or holds U+0000, else None."""
    if "\x00" in text:
        return DomainError(
            INVALID_INPUT, f"{what} at {where or '/'} holds U+0000 (NUL)", pointer=where
        )
    if _has_lone_surrogate(text):
        return DomainError(
            INVALID_INPUT, f"{what} at {where or '/'} is not valid Unicode", pointer=where
        )
    return None


MAX_JSON_DEPTH = 64
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")


def nesting_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when JSON `text` nests arrays/objects deeper than `limit`.

    Strings are blanked, everything but brackets dropped, then innermost pairs are removed
    `limit` times (each pass in C); whatever is left was nested deeper.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    for _ in range(limit):
        brackets, removed = _INNERMOST.subn("", brackets)
        if not removed:
            return False  # unbalanced leftovers are a syntax error, reported by the parser
    return _INNERMOST.search(brackets) is not None


def check_canonicalizable(value: Any, pointer: str = "") -> None:
    """Raise `DomainError(INVALID_INPUT)` at the first value RFC 8785 cannot represent.

    Accepted: None, bool, str (valid Unicode without U+0000), int within ±(2^53 - 1), finite float,
    list/tuple, dict with str keys. `bool` is checked before `int` (it is not a number).
    """
    stack: list[tuple[Any, str]] = [(value, pointer)]
    while stack:
        item, where = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, int):
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                raise DomainError(
                    INVALID_INPUT,
                    f"integer at {where or '/'} is outside ±(2^53 - 1) and cannot be "
                    "represented in canonical JSON",
                    pointer=where,
                )
        elif isinstance(item, float):
            if math.isnan(item) or math.isinf(item):
                raise DomainError(
                    INVALID_INPUT,
                    f"{item!r} at {where or '/'} is not representable in canonical JSON",
                    pointer=where,
                )
        elif isinstance(item, str):
            bad = _bad_string(item, where, "string")
            if bad is not None:
                raise bad
        elif isinstance(item, (list, tuple)):
            stack.extend((v, _child(where, i)) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, dict):
            children = []
            for key, v in item.items():
                if not isinstance(key, str):
                    raise DomainError(
                        INVALID_INPUT,
                        f"object key {key!r} at {where or '/'} is not a string",
                        pointer=where,
                    )
                bad = _bad_string(key, where, "object key")
                if bad is not None:
                    raise bad
                children.append((v, _child(where, key)))
            stack.extend(reversed(children))
        else:
            raise DomainError(
                INVALID_INPUT,
                f"value of type {type(item).__name__} at {where or '/'} is not JSON",
                pointer=where,
            )


def canonical_bytes(value: Any) -> bytes:
    """The RFC 8785 (JCS) bytes of a JSON value: what is hashed and what is signed.

    Rejects NaN, ±Infinity, integers beyond ±(2^53 - 1), non-string keys, lone
    surrogates and non-JSON types with `DomainError(INVALID_INPUT)` and a JSON pointer.
    """
    fast = _plain_canonical(value)
    if fast is not None:
        return fast
    check_canonicalizable(value)
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:  # pragma: no cover - prevented above
        raise DomainError(INVALID_INPUT, f"cannot canonicalize: {exc}") from exc
    except RecursionError as exc:
        raise DomainError(INVALID_INPUT, "value is nested too deeply to canonicalize") from exc


_SORTED = orjson.OPT_SORT_KEYS


def _plain_canonical(value: Any) -> bytes | None:
    """The RFC 8785 bytes of `value` by orjson when that is provably the same, else None.

    For exact dicts (str keys), lists, tuples, str, bool, None and integers within
    ±(2^53 - 1), orjson's sorted compact output IS RFC 8785 when every character is in
    the Basic Multilingual Plane: the same string escapes, and keys sorted by code point
    = by UTF-16 unit. Floats (their spelling differs), subclasses and other types, keys
    that are not strings, lone surrogates (orjson raises), U+0000 (refused by the strict
    path) and characters beyond the BMP (4-byte UTF-8) are left to the strict path, whose
    answer and errors are the reference. The walk visits each value once, in C-speed
    type tests; the serialisation runs in C."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is dict:
            extend(item.values())
        elif kind is list or kind is tuple:
            extend(item)
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return None
        else:
            return None
    try:
        out = orjson.dumps(value, option=_SORTED)
    except (TypeError, orjson.JSONEncodeError):
        return None
    if b"\\u0000" in out or (not out.isascii() and max(out) >= 0xF0):
        return None
    return out


def sha256_hex(data: bytes) -> str:
    """Lower-case hex sha256 of `data` (version hashes, envelope identities, chain hashes)."""
    return hashlib.sha256(data).hexdigest()


def canonical_hash(value: Any) -> str:
    """sha256 hex of the canonical bytes of `value` (e.g. a definition's version hash)."""
    return sha256_hex(canonical_bytes(value))


# --------------------------------------------------------------------------- parsing


class _DupDict(dict[str, Any]):
    """A parsed object that had a duplicate key (remembered until the pointer is found)."""

    duplicate: str = ""


class _ParseState:
    def __init__(self) -> None:
        self.found_duplicate = False

    def pairs(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                self.found_duplicate = True
                dup = _DupDict(pairs)
                dup.duplicate = key
                return dup
            out[key] = value
        return out


def _parse_int(literal: str) -> int | float:
    """Safe integers stay `int`; beyond ±(2^53 - 1) a literal must denote its double faithfully.

    Faithful means: the double holds the literal's value exactly (2^60), or the literal is
    that double's canonical spelling (RFC 8785 writes 5.932424313375719e16 as
    `59324243133757190`). Such literals read back as float, so canonical bytes always
    re-parse. A literal a double would silently change (9007199254740993) is refused.
    """
    if len(literal.lstrip("-")) > _MAX_INT_DIGITS:
        raise _NumberError(f"integer {literal[:40]}… is too large for a 64-bit float")
    value = int(literal)
    if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return value
    try:
        as_float = float(value)
    except OverflowError as exc:
        raise _NumberError(f"integer {literal[:40]}… overflows a 64-bit float") from exc
    if int(as_float) != value and rfc8785.dumps(as_float) != str(value).encode():
        raise _NumberError(
            f"integer {literal} is outside ±(2^53 - 1) and a 64-bit float would change it"
        )
    return as_float


def _parse_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise _NumberError(f"number {literal[:40]} overflows a 64-bit float")
    return value


def _parse_constant(literal: str) -> Any:
    raise _NumberError(f"{literal} is not JSON")


class _NumberError(ValueError):
    pass


def _find_duplicate(value: Any, pointer: str = "") -> str | None:
    """RFC 6901 pointer of the first duplicated key, in document order."""
    if isinstance(value, _DupDict):
        return _child(pointer, value.duplicate)
    if isinstance(value, dict):
        for key, v in value.items():
            found = _find_duplicate(v, _child(pointer, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _find_duplicate(v, _child(pointer, i))
            if found is not None:
                return found
    return None


_NOT_PLAIN = object()
#: Digits to `0`, every other byte to `.`: a run of 16 digits is then a plain search.
_DIGIT_RUNS = bytes(48 if 48 <= b <= 57 else 46 for b in range(256))
_SIXTEEN_DIGITS = b"0" * 16


def _depth_exceeds(value: Any, limit: int) -> bool:
    """True when parsed `value` nests arrays/objects deeper than `limit` (level by level)."""
    level = [value]
    for _ in range(limit):
        below: list[Any] = []
        for item in level:
            for child in item.values() if type(item) is dict else item:
                if type(child) is dict or type(child) is list:
                    below.append(child)
        if not below:
            return False
        level = below
    return True


def _plain_loads(text: str | bytes | bytearray) -> Any:
    """What `loads_strict(text)` returns, by orjson, when that is provably the same; else
    `_NOT_PLAIN` (then the strict parser runs and its verdict and messages are the
    reference). orjson refuses what the strict parser refuses (malformed text, NaN and
    Infinity, numbers overflowing a double, invalid UTF-8, lone surrogates — the strict
    parser may still accept some of those and then answers itself) but keeps the last of
    two equal keys and reads long integers differently, so:

    - duplicate keys: every member of an object has exactly one `:` outside strings, and
      orjson never escapes `:`; so when no `\\u003…` escape could spell one, the parsed
      value written again has as many `:` as the text iff no member was dropped;
    - integers: any run of 16 digits in the text (a literal that may pass ±(2^53 - 1))
      goes to the strict parser, which decides faithful doubles and refusals;
    - depth: counted on the parsed value when the text has more than `MAX_JSON_DEPTH`
      brackets."""
    if isinstance(text, str):
        try:
            text = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: orjson would refuse it too
            return _NOT_PLAIN
    if b"\\u003" in text or _SIXTEEN_DIGITS in text.translate(_DIGIT_RUNS):
        return _NOT_PLAIN
    colons, brackets = text.count(b":"), text.count(b"[") + text.count(b"{")
    try:
        value = orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return _NOT_PLAIN
    if brackets > MAX_JSON_DEPTH and _depth_exceeds(value, MAX_JSON_DEPTH):
        return _NOT_PLAIN
    if colons and orjson.dumps(value).count(b":") != colons:
        return _NOT_PLAIN
    return value


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON text strictly, so that what comes out can be canonicalized as it came in.

    Raises `DomainError(INVALID_JSON)` on malformed text, non-UTF-8 bytes, NaN/Infinity
    literals, numbers that overflow a double and integer literals beyond ±(2^53 - 1) that a
    double would round (exact ones, as canonical JSON writes large floats, become float), and
    `DomainError(DUPLICATE_KEY)` with a pointer to the repeated key. Used before any
    signature check and before definition validation.
    """
    fast = _plain_loads(text)
    return _strict_loads(text) if fast is _NOT_PLAIN else fast


def _strict_loads(text: str | bytes) -> Any:
    """`loads_strict` by the standard library's parser with hooks: the reference."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DomainError(INVALID_JSON, f"not UTF-8: {exc.reason} at byte {exc.start}") from exc
    if nesting_exceeds(text):
        raise DomainError(INVALID_JSON, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    state = _ParseState()
    try:
        value = json.loads(
            text,
            object_pairs_hook=state.pairs,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except _NumberError as exc:
        raise DomainError(INVALID_JSON, str(exc)) from exc
    except json.JSONDecodeError as exc:
        raise DomainError(
            INVALID_JSON, f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from exc
    except (ValueError, RecursionError) as exc:
        raise DomainError(INVALID_JSON, f"invalid JSON: {exc}") from exc
    if state.found_duplicate:
        where = _find_duplicate(value) or ""
        raise DomainError(DUPLICATE_KEY, f"duplicate object key at {where}", pointer=where)
    return value
