"""`when`/`then` expressions (DESIGN §3): a lark grammar compiled once into closures.

An expression is parsed with a LALR grammar that can only express comparisons, `IN`
lists, `IS [NOT] NULL`, the key test `?`, the DSL 2.1 membership tests `x IN <path>` and
`<array> CONTAINS x`, and boolean logic: no arithmetic, no calls, no attribute access.
The tree is compiled into plain Python closures, so evaluating a guard is a handful of
function calls, never a tree walk. Compiled predicates are cached by text.

Paths read JSON-like mappings only (`Mapping.get`), so `a.__class__` is just a data key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING

from lark import Lark
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from stateward.domain.errors import INVALID_EXPRESSION, DomainError
from stateward.domain.expression_closures import build_predicate
from stateward.domain.jsonvalues import compare_values, json_equal, json_kind

if TYPE_CHECKING:  # model imports the task fields, which compile expressions
    from stateward.domain.model import Predicate

__all__ = [
    "MAX_DEPTH",
    "MAX_LENGTH",
    "compare_values",
    "compile_expression",
    "expression_paths",
    "json_equal",
    "json_kind",
]

MAX_LENGTH = 4096  # bytes of UTF-8 (DESIGN §3: 4 KiB)
MAX_DEPTH = 64  # open parentheses plus stacked NOTs

_GRAMMAR = r"""
?start: or_expr
?or_expr: and_expr (_OR and_expr)*
?and_expr: not_expr (_AND not_expr)*
?not_expr: _NOT not_expr -> not_
         | cmp
?cmp: operand
    | operand COMPOP operand -> compare
    | operand _IN "(" literal ("," literal)* ")" -> in_
    | operand _IN PATH -> in_path
    | operand _CONTAINS operand -> contains
    | operand _IS _NULL -> is_null
    | operand _IS _NOT _NULL -> is_not_null
    | operand "?" operand -> has_key
?operand: literal
        | PATH -> path
        | "(" or_expr ")"
?literal: NUMBER -> number
        | "-" NUMBER -> neg_number
        | STRING -> string
        | _TRUE -> true
        | _FALSE -> false
        | _NULL -> null
COMPOP: "!=" | ">=" | "<=" | "=" | ">" | "<"
_OR.2: /(?i:or)\b/
_AND.2: /(?i:and)\b/
_NOT.2: /(?i:not)\b/
_IN.2: /(?i:in)\b/
_CONTAINS.2: /(?i:contains)\b/
_IS.2: /(?i:is)\b/
_NULL.2: /(?i:null)\b/
_TRUE.2: /(?i:true)\b/
_FALSE.2: /(?i:false)\b/
NUMBER: /[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?/
STRING: /'(?:[^']|'')*'/
PATH: /[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*/
%ignore /\s+/
"""

#: The guard grammar's text (value expressions embed it for their WHEN conditions).
GUARD_GRAMMAR = _GRAMMAR

_TOKEN_NAMES = {
    "COMPOP": "a comparison operator",
    "_OR": "OR",
    "_AND": "AND",
    "_NOT": "NOT",
    "_IN": "IN",
    "_CONTAINS": "CONTAINS",
    "_IS": "IS",
    "_NULL": "NULL",
    "_TRUE": "TRUE",
    "_FALSE": "FALSE",
    "NUMBER": "a number",
    "STRING": "a 'string'",
    "PATH": "a path",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "MINUS": "'-'",
    "QMARK": "'?'",
    "$END": "the end",
}


@dataclass(frozen=True)
class _Compiled:
    predicate: Predicate
    paths: frozenset[str]


@cache
def _parser() -> Lark:
    """The LALR parser, built once on first use (no grammar cache file: domain does no I/O)."""
    return Lark(_GRAMMAR, parser="lalr", lexer="basic", maybe_placeholders=False)


def compile_expression(text: str) -> Predicate:
    """Compile a `when`/`then` expression into a predicate `(data, input, actor) -> bool`.

    Raises DomainError INVALID_EXPRESSION (details: `position`, a 0-based char offset) for
    anything outside the grammar, texts over 4 KiB and nesting deeper than 64.
    """
    return _compile(_checked_text(text)).predicate


def expression_paths(text: str) -> frozenset[str]:
    """The paths an expression reads, as written (`state`, `input.fields.amount`, ...)."""
    return _compile(_checked_text(text)).paths


def _fail(message: str, position: int) -> DomainError:
    return DomainError(
        INVALID_EXPRESSION,
        f"{message} (at position {position})",
        details={"position": position},
    )


def _checked_text(text: object) -> str:
    if not isinstance(text, str):
        raise _fail(f"an expression must be a string, not {type(text).__name__}", 0)
    if len(text) > MAX_LENGTH or len(text.encode("utf-8", "surrogatepass")) > MAX_LENGTH:
        cut = len(text.encode("utf-8", "surrogatepass")[:MAX_LENGTH].decode("utf-8", "ignore"))
        raise _fail(f"expression is longer than {MAX_LENGTH} bytes", cut)
    return text


@lru_cache(maxsize=4096)
def _compile(text: str) -> _Compiled:
    if not text.strip():
        raise _fail("empty expression", 0)
    parser = _parser()
    try:
        _check_depth(text, parser)
        tree = parser.parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc) from None
    except LarkError as exc:  # any other parser failure is still a bad expression
        raise _fail(f"invalid expression: {exc}", 0) from None
    paths: set[str] = set()
    try:
        predicate = build_predicate(tree, paths)
    except RecursionError:  # pragma: no cover - depth is bounded before parsing
        raise _fail("expression nests too deeply", 0) from None
    return _Compiled(predicate, frozenset(paths))


def _check_depth(text: str, parser: Lark) -> None:
    """Reject nesting deeper than MAX_DEPTH from the token stream, before any parsing."""
    stack: list[int] = []
    nots = 0
    pending = 0  # sum of NOT runs saved on the stack
    for tok in parser.lex(text):
        kind = tok.type
        if kind == "_NOT":
            nots += 1
        elif kind == "LPAR":
            stack.append(nots)
            pending += nots
            nots = 0
        elif kind == "RPAR":
            if stack:
                pending -= stack.pop()
            nots = 0
        else:
            nots = 0
        if len(stack) + pending + nots > MAX_DEPTH:
            raise _fail(f"expression nests deeper than {MAX_DEPTH}", tok.start_pos or 0)


def _syntax_error(text: str, exc: UnexpectedInput) -> DomainError:
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream or 0
        return _fail(f"unexpected character {text[pos : pos + 1]!r}", pos)
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        expected = sorted({_TOKEN_NAMES.get(t, t) for t in exc.expected})
        hint = f"; expected {', '.join(expected)}" if expected else ""
        if tok.type == "$END":
            return _fail(f"unexpected end of expression{hint}", len(text))
        pos = tok.start_pos if tok.start_pos is not None else len(text)
        if tok.type == "PATH" and _IN_LIST_OPEN.search(text[:pos]):
            return _fail(_IN_LIST_PATH_HINT.format(path=str(tok)), pos)
        return _fail(f"unexpected {str(tok)!r}{hint}", pos)
    return _fail("unexpected end of expression", len(text))


#: The text before a token that sits inside an `IN ( ... ` literal list.
_IN_LIST_OPEN = re.compile(r"(?i)\bin\s*\([^()]*$")
_IN_LIST_PATH_HINT = (
    "IN ( ... ) lists literals only, but {path!r} is a path; to test whether an array "
    "held in the data has an element, write `x IN {path}` (no parentheses) or "
    "`{path} CONTAINS x`"
)
