"""A validation rule for string literals written in the GraphQL document itself.

Variables go through the strict JSON loader (`http/strict_json.py`); a literal such as
`instance(id: "a\\u0000b")` does not. PostgreSQL cannot take U+0000 in a text parameter
(asyncpg raised, the client saw INTERNAL_ERROR) while SQLite stores it, so NUL is refused
in every literal, on every database, as INVALID_INPUT. (graphql-core's lexer already
refuses lone surrogate escapes.)
"""

from __future__ import annotations

from typing import Any

from graphql import ASTValidationRule, GraphQLError, StringValueNode

from stateward.domain.errors import INVALID_INPUT


class NoNulLiteralRule(ASTValidationRule):
    """Refuse string literals holding U+0000."""

    def enter_string_value(self, node: StringValueNode, *_: Any) -> None:
        """Report a literal with a NUL character."""
        if "\x00" in node.value:
            self.report_error(
                GraphQLError(
                    "string literals may not hold U+0000 (NUL)",
                    node,
                    extensions={"code": INVALID_INPUT},
                )
            )
