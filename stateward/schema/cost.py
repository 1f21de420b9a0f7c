"""Document cost limits that stay cheap however the document is shaped.

Two guards, both run before any resolver:

- `too_many_tokens(text, limit)`: a regex count of the document's lexical tokens, run
  before the parser. graphql-core's own `max_tokens` limit stops parsing at the limit, but
  parsing 5,000 tokens in pure Python already costs 60-100 ms on a small machine, twice
  when a cache retries; the regex counts 100,000 tokens in a few ms and the document is
  refused without parsing it at all (issue 9, item 9).
- `cost_rule(...)`: ONE validation rule for operation depth, alias count and field count,
  counted with every fragment's cost computed ONCE. Strawberry's `QueryDepthLimiter` and
  `MaxAliasesLimiter` walk every spread again, so 21 fragments that each spread the
  previous one twice (`fragment Fi on Query { ...F(i-1) ...F(i-1) }`, 856 bytes) made them
  walk 2^21 spreads and stall the event loop for seconds (item 1). Here a fragment's cost
  is the sum of its selections' costs, computed in dependency order, so the work is linear
  in the document and the expanded field count (2^21) is simply a number over the limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from graphql import (
    ASTValidationRule,
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationContext,
)
from graphql.language import SKIP

QUERY_TOO_COMPLEX = "QUERY_TOO_COMPLEX"
_CAP = 10**12  # costs saturate here: 2^1000 spreads must not build a huge int

# One alternative per GraphQL lexical token kind, the common ones first (name, punctuator,
# number, block string, string, comment, spread). Commas and whitespace are ignored, as by
# the lexer. A string cut off by the end of the text counts as one token, so counting a
# prefix of a document never counts more tokens than the whole document has.
_TOKEN = re.compile(
    r"[_A-Za-z][_0-9A-Za-z]*"
    r"|[!$&()\[\]{}:=@|]"
    r"|-?\d[0-9A-Za-z.+-]*"
    r'|"""(?:[^"\\]++|\\.|"(?!""))*+(?:"""|\Z)'
    r'|"(?:[^"\\\n\r]++|\\.)*+(?:"|\Z)'
    r"|#[^\n\r]*"
    r"|\.\.\.",
    re.S,
)


def count_tokens(text: str) -> int:
    """The number of GraphQL lexical tokens (comments included, like `max_tokens`)."""
    return _TOKEN.subn("", text)[1]


def too_many_tokens(text: str | None, limit: int) -> bool:
    """True when `text` holds more than `limit` tokens.

    A text of <= `limit` characters cannot, so short documents are not scanned at all.
    Longer ones are counted on growing prefixes (4x, 16x the limit, then all of it): a
    flood of tokens is refused after scanning a few tens of KB, whatever its size.
    """
    if text is None or len(text) <= limit:
        return False
    for size in (limit * 4, limit * 16, len(text)):
        if count_tokens(text[:size]) > limit:
            return True
        if size >= len(text):
            return False
    return False


def token_limit_message(limit: int) -> str:
    """The same message graphql-core's parser gives when it hits `max_tokens`."""
    return f"Syntax Error: Document contains more than {limit} tokens. Parsing aborted."


@dataclass(frozen=True)
class Cost:
    """What a selection set costs: nesting depth, aliases and fields, fragments expanded."""

    depth: int = 0
    aliases: int = 0
    fields: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            max(self.depth, other.depth),
            min(self.aliases + other.aliases, _CAP),
            min(self.fields + other.fields, _CAP),
        )


ZERO = Cost()


def _selections_cost(node: SelectionSetNode | None, fragments: dict[str, Cost]) -> Cost:
    total = ZERO
    if node is None:
        return total
    for selection in node.selections:
        if isinstance(selection, FieldNode):
            inner = _selections_cost(selection.selection_set, fragments)
            introspection = selection.name.value.startswith("__")
            depth = 0 if introspection or selection.selection_set is None else inner.depth + 1
            alias = 1 if selection.alias is not None else 0
            total = total + Cost(depth, inner.aliases + alias, inner.fields + 1)
        elif isinstance(selection, FragmentSpreadNode):
            total = total + fragments.get(selection.name.value, ZERO)
        elif isinstance(selection, InlineFragmentNode):
            total = total + _selections_cost(selection.selection_set, fragments)
    return total


def _spreads(node: SelectionSetNode | None) -> Iterable[str]:
    if node is None:
        return
    for selection in node.selections:
        if isinstance(selection, FragmentSpreadNode):
            yield selection.name.value
        elif isinstance(selection, FieldNode | InlineFragmentNode):
            yield from _spreads(selection.selection_set)


def fragment_costs(document: DocumentNode) -> dict[str, Cost]:
    """Every fragment's expanded cost, each computed once, in dependency order.

    Iterative depth-first order (a chain of 1,000 fragments must not hit the recursion
    limit); a fragment inside a cycle counts as zero there (NoFragmentCyclesRule reports
    the cycle itself).
    """
    defs = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    deps = {name: list(dict.fromkeys(_spreads(d.selection_set))) for name, d in defs.items()}
    costs: dict[str, Cost] = {}
    started: set[str] = set()
    for root in defs:
        if root in started:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        started.add(root)
        while stack:
            name, index = stack[-1]
            children = deps[name]
            if index < len(children):
                stack[-1] = (name, index + 1)
                child = children[index]
                if child in defs and child not in started:
                    started.add(child)
                    stack.append((child, 0))
                continue
            stack.pop()
            costs[name] = _selections_cost(defs[name].selection_set, costs)
    return costs


def cost_rule(*, max_depth: int, max_aliases: int, max_fields: int) -> type[ASTValidationRule]:
    """A validation rule class refusing operations over any of the three limits."""

    class CostRule(ASTValidationRule):
        """Depth, alias and field limits over memoised fragment costs (see the module)."""

        def enter_document(self, node: DocumentNode, *_: Any) -> Any:
            costs = fragment_costs(node)
            for definition in node.definitions:
                if isinstance(definition, OperationDefinitionNode):
                    self._check(definition, _selections_cost(definition.selection_set, costs))
            return SKIP

        def _check(self, op: OperationDefinitionNode, cost: Cost) -> None:
            name = op.name.value if op.name else "anonymous"
            context: ValidationContext = self.context  # type: ignore[assignment]
            if cost.depth > max_depth:
                context.report_error(
                    GraphQLError(f"'{name}' exceeds maximum operation depth of {max_depth}", op)
                )
            if cost.aliases > max_aliases:
                context.report_error(
                    GraphQLError(f"{cost.aliases} aliases found. Allowed: {max_aliases}", op)
                )
            if cost.fields > max_fields:
                shown = f"{cost.fields}" if cost.fields < _CAP else f"more than {_CAP}"
                context.report_error(
                    GraphQLError(
                        f"'{name}' selects {shown} fields once fragments are expanded; "
                        f"the limit is {max_fields}",
                        op,
                        extensions={"code": QUERY_TOO_COMPLEX},
                    )
                )

    return CostRule
