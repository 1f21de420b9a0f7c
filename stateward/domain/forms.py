"""Form templates of states (DESIGN §2.1): parse them, and validate `input.fields` by them.

`parse_form` turns the raw `form` object of a state into a `FormTemplate`, reporting
INVALID_FORM problems with RFC 6901 pointers. `validate_fields` checks submitted fields
against a template (required, types, ranges, lengths, patterns, options; unknown fields
rejected) and reports INVALID_INPUT problems pointing at `/fields/<name>`.
"""

from __future__ import annotations

import math
import re
import re._constants as sre_constants  # type: ignore[import-not-found]
import re._parser as sre_parser  # type: ignore[import-not-found]
from collections.abc import Mapping
from datetime import date, datetime
from functools import lru_cache
from typing import Any

from stateward.domain.errors import INVALID_FORM, INVALID_INPUT, DomainError, Problem
from stateward.domain.jsonvalues import json_equal, json_kind
from stateward.domain.model import FormField, FormTemplate
from stateward.domain.mutations import pointer_join

__all__ = [
    "FIELD_TYPES",
    "MAX_PATTERN_INPUT",
    "check_fields",
    "field_problem",
    "parse_form",
    "validate_fields",
]

FIELD_TYPES = ("string", "number", "integer", "boolean", "date", "datetime", "email", "enum")
MAX_PATTERN_INPUT = 10_000  # longest string a `pattern` is matched against
MAX_PATTERN_LENGTH = 1_000

_COMMON = ("type", "required", "label", "help")
_APPLICABLE: dict[str, tuple[str, ...]] = {
    "string": ("min_length", "max_length", "pattern"),
    "email": ("min_length", "max_length", "pattern"),
    "number": ("min", "max"),
    "integer": ("min", "max"),
    "enum": ("options",),
}
_ALL_PROPERTIES = (
    *_COMMON,
    "min",
    "max",
    "min_length",
    "max_length",
    "pattern",
    "options",
)

_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DATETIME = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt]([0-9]{2}:[0-9]{2}:[0-9]{2})(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_EMAIL = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@" + _LABEL + r"(?:\." + _LABEL + r")+")


# --- parsing a template -------------------------------------------------------------------


def parse_form(raw: object, pointer: str) -> tuple[FormTemplate | None, list[Problem]]:
    """Build a FormTemplate from a state's raw `form`; None plus INVALID_FORM problems if bad."""
    if not isinstance(raw, Mapping):
        return None, [_bad("`form` must be an object with `fields`", pointer)]
    problems = [
        _bad(f"unknown form property {key!r} (known: fields)", pointer_join(pointer, key))
        for key in raw
        if key != "fields"
    ]
    raw_fields = raw.get("fields")
    fields_at = pointer_join(pointer, "fields")
    if raw_fields is None:
        return None, [*problems, _bad("`form` needs a `fields` object", fields_at)]
    if not isinstance(raw_fields, Mapping):
        return None, [*problems, _bad("`fields` must be an object of field names", fields_at)]
    fields: list[FormField] = []
    for name, spec in raw_fields.items():
        field, found = _parse_field(name, spec, pointer_join(fields_at, name))
        problems.extend(found)
        if field is not None:
            fields.append(field)
    if problems:
        return None, problems
    return FormTemplate(tuple(fields)), []


def _bad(message: str, pointer: str) -> Problem:
    return Problem(INVALID_FORM, message, pointer)


def _parse_field(name: str, spec: object, at: str) -> tuple[FormField | None, list[Problem]]:
    if not name or "." in name:
        return None, [_bad(f"field name {name!r} must be non-empty and contain no '.'", at)]
    if not isinstance(spec, Mapping):
        return None, [_bad(f"field {name!r} must be an object with a `type`", at)]
    kind = spec.get("type")
    if kind not in FIELD_TYPES:
        return None, [
            _bad(
                f"field {name!r} has type {kind!r}; expected one of {', '.join(FIELD_TYPES)}",
                pointer_join(at, "type"),
            )
        ]
    allowed = _COMMON + _APPLICABLE.get(str(kind), ())
    problems: list[Problem] = []
    for key, value in spec.items():
        where = pointer_join(at, key)
        if key not in _ALL_PROPERTIES:
            problems.append(_bad(f"unknown field property {key!r}", where))
        elif key not in allowed:
            problems.append(_bad(f"{key!r} does not apply to a {kind} field", where))
        else:
            problems.extend(_check_property(key, value, where))
    if kind == "enum" and "options" not in spec:
        problems.append(_bad(f"enum field {name!r} needs `options`", pointer_join(at, "options")))
    problems.extend(_check_bounds(spec, at, "min", "max"))
    problems.extend(_check_bounds(spec, at, "min_length", "max_length"))
    if problems:
        return None, problems
    options = spec.get("options")
    return FormField(
        name=name,
        type=str(kind),
        required=bool(spec.get("required", False)),
        min=spec.get("min"),
        max=spec.get("max"),
        min_length=_int_or_none(spec.get("min_length")),
        max_length=_int_or_none(spec.get("max_length")),
        pattern=spec.get("pattern"),
        options=tuple(options) if options is not None else None,
        label=spec.get("label"),
        help=spec.get("help"),
    ), []


def _check_property(key: str, value: Any, where: str) -> list[Problem]:
    kind = json_kind(value)
    if key == "type":
        return []
    if key == "required" and kind != "boolean":
        return [_bad("`required` must be true or false", where)]
    if key in ("label", "help") and kind != "string":
        return [_bad(f"`{key}` must be a string", where)]
    if key in ("min", "max") and (kind != "number" or not math.isfinite(value)):
        return [_bad(f"`{key}` must be a number", where)]
    if key in ("min_length", "max_length") and (
        kind != "number" or not math.isfinite(value) or value != int(value) or value < 0
    ):
        return [_bad(f"`{key}` must be a non-negative integer", where)]
    if key == "pattern":
        return _check_pattern(value, where)
    if key == "options":
        return _check_options(value, where)
    return []


def _check_pattern(value: Any, where: str) -> list[Problem]:
    if not isinstance(value, str):
        return [_bad("`pattern` must be a string (a Python regular expression)", where)]
    if len(value) > MAX_PATTERN_LENGTH:
        return [_bad(f"`pattern` is longer than {MAX_PATTERN_LENGTH} characters", where)]
    try:
        _compiled(value)
    except re.error as exc:
        return [_bad(f"`pattern` is not a valid regular expression: {exc}", where)]
    reason = unsafe_pattern_reason(value)
    if reason:
        return [_bad(f"`pattern` is unsafe: {reason}", where)]
    return []


def _check_options(value: Any, where: str) -> list[Problem]:
    if not isinstance(value, list) or not value:
        return [_bad("`options` must be a non-empty list", where)]
    problems = []
    for n, option in enumerate(value):
        if json_kind(option) not in ("string", "number", "boolean"):
            problems.append(_bad("an option must be a string, number or boolean", f"{where}/{n}"))
        elif any(json_equal(option, earlier) for earlier in value[:n]):
            problems.append(_bad(f"duplicate option {option!r}", f"{where}/{n}"))
    return problems


def _check_bounds(spec: Mapping[str, Any], at: str, low: str, high: str) -> list[Problem]:
    lo, hi = spec.get(low), spec.get(high)
    if json_kind(lo) == "number" and json_kind(hi) == "number" and lo > hi:  # type: ignore[operator]
        return [_bad(f"`{low}` is greater than `{high}`", pointer_join(at, high))]
    return []


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


_REPEATS = frozenset(
    getattr(sre_constants, name)
    for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
    if hasattr(sre_constants, name)
)


def unsafe_pattern_reason(pattern: str) -> str | None:
    """Why a pattern risks catastrophic backtracking (a repeat inside an unbounded repeat).

    Python's `re` has no timeout, so `(a+)+$`-style patterns from a definition could pin a
    worker on a crafted input: they are refused when the form is parsed.
    """
    try:
        parsed = sre_parser.parse(pattern)
    except Exception:  # a pattern `re.compile` accepted; be conservative otherwise
        return None
    return "a repeated group contains another repeat" if _nested_repeat(parsed, False) else None


def _nested_repeat(items: Any, inside_unbounded: bool) -> bool:
    stack = [(items, inside_unbounded)]
    while stack:
        current, inside = stack.pop()
        for op, arg in current:
            if op in _REPEATS:
                low, high, body = arg
                if inside and high != low:
                    return True
                unbounded = high == sre_constants.MAXREPEAT or high > 1
                stack.append((body, inside or (unbounded and not _has_fixed_atom(body))))
            else:
                for part in arg if isinstance(arg, tuple | list) else (arg,):
                    if isinstance(part, sre_parser.SubPattern):
                        stack.append((part, inside))
                    elif isinstance(part, list):
                        stack.extend(
                            (p, inside) for p in part if isinstance(p, sre_parser.SubPattern)
                        )
    return False


_FIXED_ATOMS = frozenset(
    getattr(sre_constants, name) for name in ("LITERAL", "NOT_LITERAL", "IN", "ANY")
)


def _has_fixed_atom(body: Any) -> bool:
    """True when a repeated body holds a mandatory one-character item (`(-[a-z]+)*`).

    Such a separator makes the split of the input between iterations unambiguous enough;
    bodies made only of repeats and optional parts (`(a+)+`, `(\\w+\\s?)*`) are refused.
    """
    for op, arg in body:
        if op in _FIXED_ATOMS:
            return True
        if op == sre_constants.SUBPATTERN and _has_fixed_atom(arg[-1]):
            return True
    return False


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# --- validating submitted fields ----------------------------------------------------------


def validate_fields(form: FormTemplate, fields: object) -> list[Problem]:
    """Check `input.fields` against a form; INVALID_INPUT problems at `/fields/<name>`.

    Missing/None `fields` counts as `{}`. Required fields must be present, not null and
    (for text) not empty; optional fields may be null. Unknown fields are rejected.
    """
    if fields is None:
        fields = {}
    if not isinstance(fields, Mapping):
        return [Problem(INVALID_INPUT, "`fields` must be an object", "/fields")]
    problems: list[Problem] = []
    for name in fields:
        if form.field(name) is None:
            problems.append(_invalid(str(name), "is not a field of this form"))
    for field in form.fields:
        value = fields.get(field.name)
        if value is None or (value == "" and isinstance(value, str)):
            if field.required:
                problems.append(_invalid(field.name, "is required"))
            continue
        message = field_problem(field, value)
        if message:
            problems.append(_invalid(field.name, message))
    return problems


def check_fields(form: FormTemplate, fields: object) -> None:
    """Raise DomainError INVALID_INPUT (with every problem) when `fields` do not fit `form`."""
    problems = validate_fields(form, fields)
    if problems:
        first = problems[0]
        raise DomainError(
            INVALID_INPUT,
            f"{len(problems)} invalid field(s); first: {first.pointer}: {first.message}",
            pointer=first.pointer,
            problems=problems,
        )


def check_prefill(form: FormTemplate | None, data: object) -> None:
    """Data a visitor starts a public workflow with (`startPublic`, seed §15): only keys the
    public initial state's form declares, each value of its field's type (required fields
    are not required yet: the visitor fills the form next). INVALID_INPUT at `/data/<key>`
    otherwise, so visitors cannot seed arbitrary instance data."""
    if data is None:
        return
    if not isinstance(data, Mapping):
        raise DomainError(INVALID_INPUT, "data must be an object", pointer="/data")
    problems: list[Problem] = []
    for name, value in data.items():
        field = form.field(name) if form is not None else None
        where = pointer_join("/data", str(name))
        if field is None:
            problems.append(Problem(INVALID_INPUT, f"{name!r} is not a field of the form", where))
            continue
        message = None if value is None else field_problem(field, value)
        if message:
            problems.append(Problem(INVALID_INPUT, f"field {name!r} {message}", where))
    if problems:
        first = problems[0]
        raise DomainError(INVALID_INPUT, first.message, pointer=first.pointer, problems=problems)


def _invalid(name: str, message: str) -> Problem:
    return Problem(INVALID_INPUT, f"field {name!r} {message}", pointer_join("/fields", name))


def field_problem(field: FormField, value: Any) -> str | None:
    """Why `value` does not fit `field` (type, range, length, pattern, options), or None."""
    kind = json_kind(value)
    t = field.type
    if t in ("number", "integer"):
        if kind != "number" or not math.isfinite(value):
            return f"must be a{'n integer' if t == 'integer' else ' number'}, not {kind}"
        if t == "integer" and value != int(value):
            return "must be an integer"
        if field.min is not None and value < field.min:
            return f"must be at least {field.min}"
        if field.max is not None and value > field.max:
            return f"must be at most {field.max}"
        return None
    if t == "boolean":
        return None if kind == "boolean" else f"must be true or false, not {kind}"
    if t == "enum":
        if any(json_equal(value, option) for option in field.options or ()):
            return None
        return f"must be one of {', '.join(map(repr, field.options or ()))}"
    if kind != "string":
        return f"must be a string, not {kind}"
    if t == "date" and not _is_date(value):
        return "must be a date (YYYY-MM-DD)"
    if t == "datetime" and not _is_datetime(value):
        return "must be an RFC 3339 date-time (e.g. 2026-01-01T09:30:00Z)"
    if t == "email" and not (len(value) <= 254 and _EMAIL.fullmatch(value)):
        return "must be an email address"
    return _text_problem(field, value)


def _text_problem(field: FormField, value: str) -> str | None:
    if field.min_length is not None and len(value) < field.min_length:
        return f"must be at least {field.min_length} characters long"
    if field.max_length is not None and len(value) > field.max_length:
        return f"must be at most {field.max_length} characters long"
    if field.pattern is not None:
        if len(value) > MAX_PATTERN_INPUT:
            return f"is too long to check against its pattern (over {MAX_PATTERN_INPUT})"
        if not _compiled(field.pattern).fullmatch(value):
            return f"does not match the pattern {field.pattern!r}"
    return None


def _is_date(value: str) -> bool:
    if not _DATE.fullmatch(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _is_datetime(value: str) -> bool:
    match = _DATETIME.fullmatch(value)
    if not match:
        return False
    day, clock, fraction, zone = match.groups()
    zone = "+00:00" if zone in ("Z", "z") else zone
    fraction = (fraction or "")[:7]  # datetime keeps microseconds: 6 digits after the dot
    try:
        datetime.fromisoformat(f"{day}T{clock}{fraction}{zone}")
    except ValueError:
        return False
    return True
