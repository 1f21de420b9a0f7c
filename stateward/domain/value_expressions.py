"""Value expressions (issue 16): a task's `priority`, `due` and `followUp` computed from
the instance data when its state is entered.

The guard language of DESIGN §3 gives true/false; a task field needs a number or a
timestamp. A value expression is that language's operands (numbers, 'strings', NULL,
data paths) with arithmetic and a conditional whose conditions are guards:

    value := term (("+" | "-") term)* ;  term := unary (("*" | "/") unary)*
    unary := "-" unary | NUMBER | STRING | NULL | path | "(" value ")"
           | CASE (WHEN <guard> THEN value)+ [ELSE value] END

Paths read the instance data only (`input.*` and `actor.*` are refused: a task is opened
by the engine, after the entering event's mutations). Evaluation is total and pure:
numbers combine as numbers (`/` by zero gives NULL); a timestamp (a string in ISO 8601
with an offset) plus or minus a number of seconds is a timestamp, a timestamp minus a
timestamp is seconds; anything else (a missing path, a string in arithmetic) is NULL.
A CASE takes the first WHEN whose guard holds (guard semantics: NULL compares false),
else its ELSE (NULL without one).

Compilation also infers what kinds of value an expression can give (`number`,
`timestamp`, `string`, `null`, or `any` for data read at run time), so a field can refuse
at validation an expression that can never give what it needs, and combining kinds that
never combine (`'a' + 1`, a timestamp times a number) is refused outright.
`CASE WHEN THEN ELSE END` are reserved words inside a value expression (not in guards).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from typing import Any

from lark import Lark, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from stateward.domain.errors import INVALID_EXPRESSION, DomainError
from stateward.domain.expression_closures import build_predicate
from stateward.domain.expressions import GUARD_GRAMMAR, MAX_DEPTH, MAX_LENGTH

__all__ = ["ValueExpression", "as_instant", "compile_value", "parse_timestamp"]

#: What a value expression returns given the instance data.
ValueFn = Callable[[Mapping[str, Any]], Any]

NUMBER, TIMESTAMP, STRING, NULL, ANY = "number", "timestamp", "string", "null", "any"

_GRAMMAR = r"""
?value_start: value
?value: term (plus | minus)*
plus: "+" term
minus: "-" term
?term: unary (times | divided)*
times: "*" unary
divided: "/" unary
?unary: "-" unary -> negate
      | NUMBER -> number
      | STRING -> string
      | _NULL -> null
      | PATH -> path
      | "(" value ")"
      | _CASE when+ [_ELSE value] _END -> case
when: _WHEN or_expr _THEN value
_CASE.3: /(?i:case)\b/
_WHEN.3: /(?i:when)\b/
_THEN.3: /(?i:then)\b/
_ELSE.3: /(?i:else)\b/
_END.3: /(?i:end)\b/
""" + GUARD_GRAMMAR.replace("?start: or_expr\n", "")

_TOKEN_NAMES = {
    "COMPOP": "a comparison operator",
    "NUMBER": "a number",
    "STRING": "a 'string'",
    "PATH": "a path",
    "LPAR": "'('",
    "RPAR": "')'",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "STAR": "'*'",
    "SLASH": "'/'",
    "$END": "the end",
}


@dataclass(frozen=True)
class ValueExpression:
    """A compiled value expression: its text, evaluator and the kinds it can give."""

    text: str
    kinds: frozenset[str]
    paths: frozenset[str]
    evaluate: ValueFn = field(compare=False, repr=False)

    @property
    def constant(self) -> bool:
        """True when it reads no data (its one value is known at validation)."""
        return not self.paths


@cache
def _parser() -> Lark:
    return Lark(_GRAMMAR, start="value_start", parser="lalr", lexer="basic",
                maybe_placeholders=False, propagate_positions=True)  # fmt: skip


def _fail(message: str, position: int) -> DomainError:
    return DomainError(
        INVALID_EXPRESSION, f"{message} (at position {position})", details={"position": position}
    )


def compile_value(text: object) -> ValueExpression:
    """Compile a value expression; DomainError INVALID_EXPRESSION (details `position`) for
    text outside the grammar, over 4 KiB, nesting deeper than 64, reading `input.`/`actor.`,
    or combining kinds of values that never combine."""
    if not isinstance(text, str):
        raise _fail(f"an expression must be a string, not {type(text).__name__}", 0)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_LENGTH:
        raise _fail(f"expression is longer than {MAX_LENGTH} bytes", 0)
    return _compile(text)


@lru_cache(maxsize=1024)
def _compile(text: str) -> ValueExpression:
    if not text.strip():
        raise _fail("empty expression", 0)
    parser = _parser()
    try:
        _check_depth(text, parser)
        tree = parser.parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc) from None
    except LarkError as exc:
        raise _fail(f"invalid expression: {exc}", 0) from None
    paths: set[str] = set()
    fn, kinds = _build(tree, paths)
    for path in sorted(paths):
        root = path.split(".", 1)[0]
        if root in ("input", "actor"):
            raise _fail(
                f"{path!r}: a value expression reads the instance data only (copy what you need "
                "into the data with the entering action's `mutate`)",
                max(text.find(path), 0),
            )
    return ValueExpression(text, frozenset(kinds), frozenset(paths), fn)


def _check_depth(text: str, parser: Lark) -> None:
    """Reject nesting deeper than MAX_DEPTH (parentheses, CASE, runs of NOT or '-')."""
    open_count = 0
    run = 0
    for tok in parser.lex(text):
        kind = tok.type
        if kind in ("LPAR", "_CASE"):
            open_count += 1
            run = 0
        elif kind in ("RPAR", "_END"):
            open_count = max(open_count - 1, 0)
            run = 0
        elif kind in ("_NOT", "MINUS"):
            run += 1
        else:
            run = 0
        if open_count + run > MAX_DEPTH:
            raise _fail(f"expression nests deeper than {MAX_DEPTH}", tok.start_pos or 0)


def _syntax_error(text: str, exc: UnexpectedInput) -> DomainError:
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream or 0
        hint = ""
        if parse_timestamp(text.strip()) is not None:
            hint = f"; a timestamp is a 'string': '{text.strip()}'"
        return _fail(f"unexpected character {text[pos : pos + 1]!r}{hint}", pos)
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        expected = sorted({_TOKEN_NAMES.get(t, t.strip("_")) for t in exc.expected})
        hint = f"; expected {', '.join(expected)}" if expected else ""
        if tok.type == "$END":
            return _fail(f"unexpected end of expression{hint}", len(text))
        pos = tok.start_pos if tok.start_pos is not None else len(text)
        if tok.type in _GUARD_TOKENS:
            hint = ("; a comparison gives true or false, not a value: write "
                    "CASE WHEN <condition> THEN <value> ELSE <value> END")  # fmt: skip
        return _fail(f"unexpected {str(tok)!r}{hint}", pos)
    return _fail("unexpected end of expression", len(text))  # pragma: no cover


#: Tokens of a guard that a value cannot hold outside a CASE condition.
_GUARD_TOKENS = frozenset({"COMPOP", "_AND", "_OR", "_NOT", "_IN", "_IS", "_CONTAINS", "QMARK"})


# --- values --------------------------------------------------------------------------------


def parse_timestamp(value: Any) -> datetime | None:
    """A string in ISO 8601 with a UTC offset as a datetime; None for anything else."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_time(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else parse_timestamp(value)


def _seconds(delta: timedelta) -> int | float:
    whole = delta.days * 86400 + delta.seconds
    return whole if delta.microseconds == 0 else whole + delta.microseconds / 1e6


def _add(a: Any, b: Any, sign: int) -> Any:
    try:
        if _number(a) and _number(b):
            return _finite(a + b if sign > 0 else a - b)
        when = _as_time(a)
        if when is not None and _number(b):
            return when + timedelta(seconds=sign * float(b))
        if sign > 0 and _number(a) and (other := _as_time(b)) is not None:
            return other + timedelta(seconds=float(a))
        if sign < 0 and when is not None and (other := _as_time(b)) is not None:
            return _seconds(when - other)
    except (OverflowError, ValueError):
        return None
    return None


def _finite(value: int | float) -> int | float | None:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _multiply(a: Any, b: Any, divide: bool) -> Any:
    if not (_number(a) and _number(b)):
        return None
    try:
        if not divide:
            return _finite(a * b)
        if b == 0:
            return None
        if isinstance(a, int) and isinstance(b, int) and a % b == 0:
            return a // b
        return _finite(a / b)
    except OverflowError:  # an integer too large for a float: no value
        return None


# --- compiling -----------------------------------------------------------------------------

Built = tuple[ValueFn, set[str]]


def _const(value: Any, kind: str) -> Built:
    return (lambda d: value), {kind}


def _build(node: Tree, paths: set[str]) -> Built:
    kind = node.data
    if kind == "number":
        raw = str(node.children[0])
        return _const(int(raw) if raw.isdigit() else float(raw), NUMBER)
    if kind == "string":
        text = str(node.children[0])[1:-1].replace("''", "'")
        return _const(text, TIMESTAMP if parse_timestamp(text) is not None else STRING)
    if kind == "null":
        return _const(None, NULL)
    if kind == "path":
        return _path(str(node.children[0]), paths), {ANY}
    if kind == "negate":
        inner, kinds = _build(node.children[0], paths)  # type: ignore[arg-type]
        _require(kinds, {NUMBER}, "'-' negates a number", node)
        return (lambda d: -v if _number(v := inner(d)) else None), _combine(kinds, {NUMBER})
    if kind in ("value", "term"):
        return _chain(node, paths)
    if kind == "case":
        return _case(node, paths)
    raise _fail(f"unexpected {kind!r}", 0)  # pragma: no cover - the grammar has no other


def _path(text: str, paths: set[str]) -> ValueFn:
    paths.add(text)
    keys = tuple(text.split("."))

    def get(data: Mapping[str, Any]) -> Any:
        found: Any = data
        for key in keys:
            if not isinstance(found, Mapping):
                return None
            found = found.get(key)
        return found

    return get


def _combine(kinds: set[str], result: set[str]) -> set[str]:
    """The kinds of an operation's result: NULL when an operand may be NULL or unknown."""
    out = set(result)
    if kinds & {NULL, ANY}:
        out.add(NULL)
    return out


def _require(kinds: set[str], allowed: set[str], message: str, node: Tree) -> None:
    known = kinds - {ANY, NULL}
    if known - allowed:
        raise _fail(f"{message}, not a {' or '.join(sorted(known - allowed))}", _pos(node))


def _pos(node: Tree) -> int:
    return 0 if node.meta.empty else node.meta.start_pos


def _chain(node: Tree, paths: set[str]) -> Built:
    first, kinds = _build(node.children[0], paths)  # type: ignore[arg-type]
    steps: list[tuple[str, ValueFn]] = []
    for child in node.children[1:]:
        assert isinstance(child, Tree)
        fn, right = _build(child.children[0], paths)  # type: ignore[arg-type]
        kinds = _result_kinds(child.data, kinds, right, child)
        steps.append((child.data, fn))

    def evaluate(data: Mapping[str, Any]) -> Any:
        value = first(data)
        for op, fn in steps:
            if value is None:
                return None
            other = fn(data)
            if op == "plus":
                value = _add(value, other, 1)
            elif op == "minus":
                value = _add(value, other, -1)
            else:
                value = _multiply(value, other, op == "divided")
        return value

    return evaluate, kinds


def _result_kinds(op: str, left: set[str], right: set[str], node: Tree) -> set[str]:
    """What `left op right` can give; refuses operands that can never combine."""
    symbol = {"plus": "+", "minus": "-", "times": "*", "divided": "/"}[op]
    if op in ("times", "divided"):
        _require(left, {NUMBER}, f"'{symbol}' takes numbers", node)
        _require(right, {NUMBER}, f"'{symbol}' takes numbers", node)
        return _combine(left | right, {NUMBER, NULL} if op == "divided" else {NUMBER})
    _require(left, {NUMBER, TIMESTAMP}, f"'{symbol}' takes numbers and timestamps", node)
    _require(right, {NUMBER, TIMESTAMP}, f"'{symbol}' takes numbers and timestamps", node)
    out: set[str] = set()
    for a in left - {NULL}:
        for b in right - {NULL}:
            if ANY in (a, b):  # known at run time only
                out.add(ANY)
            elif a == b == NUMBER:
                out.add(NUMBER)
            elif (a, b) == (NUMBER, TIMESTAMP) and op == "minus":
                raise _fail("a number minus a timestamp is not a value", _pos(node))
            elif {a, b} == {NUMBER, TIMESTAMP}:
                out.add(TIMESTAMP)
            elif op == "minus":  # timestamp - timestamp: the seconds between them
                out.add(NUMBER)
            else:
                raise _fail("a timestamp plus a timestamp is not a value", _pos(node))
    return _combine(left | right, out or {NULL})


def _case(node: Tree, paths: set[str]) -> Built:
    branches: list[tuple[Callable[..., bool], ValueFn]] = []
    kinds: set[str] = set()
    otherwise: ValueFn = lambda d: None  # noqa: E731
    has_else = False
    for child in node.children:
        assert isinstance(child, Tree)
        if child.data == "when":
            cond = build_predicate(child.children[0], paths)
            fn, found = _build(child.children[1], paths)  # type: ignore[arg-type]
            branches.append((cond, fn))
            kinds |= found
        else:
            otherwise, found = _build(child, paths)
            kinds |= found
            has_else = True
    if not has_else:
        kinds.add(NULL)
    empty: Mapping[str, Any] = {}

    def evaluate(data: Mapping[str, Any]) -> Any:
        for cond, fn in branches:
            if cond(data, empty, empty):
                return fn(data)
        return otherwise(data)

    return evaluate, kinds


# --- results for task fields ----------------------------------------------------------------


def as_instant(value: Any, entered_at: datetime, max_seconds: float) -> datetime | None:
    """A due/follow-up value as an instant in UTC: seconds after `entered_at`
    (0..max_seconds), a timestamp (a datetime, or a string with an offset); None for
    anything else (or a date outside what a datetime holds)."""
    if _number(value):
        if not 0 <= value <= max_seconds:
            return None
        try:
            return entered_at + timedelta(seconds=float(value))
        except OverflowError:  # pragma: no cover - bounded by max_seconds
            return None
    when = _as_time(value)
    try:
        return None if when is None else when.astimezone(UTC)
    except OverflowError:  # year 1 or 9999 with an offset: no UTC instant a column holds
        return None
