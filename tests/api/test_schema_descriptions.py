"""Every type, field, argument and enum value of the served schema has a description
(issue 16), so GraphiQL's documentation pane explains the API on its own; and the
catalogue of descriptions (`stateward.schema.descriptions`) names nothing that is gone."""

from __future__ import annotations

from graphql import GraphQLScalarType

from stateward.schema.descriptions import DESCRIPTIONS, schema_keys
from stateward.schema.root import create_schema

#: graphql-core's built-in scalars (described by the GraphQL spec, not by us).
BUILT_IN = {"String", "Int", "Float", "Boolean", "ID"}


def test_every_type_field_argument_and_enum_value_has_a_description() -> None:
    elements = schema_keys(create_schema()._schema)
    missing = sorted(
        key
        for key, element in elements.items()
        if not (isinstance(element, GraphQLScalarType) and key in BUILT_IN)
        and not (getattr(element, "description", None) or "").strip()
    )
    assert missing == [], f"{len(missing)} without a description: {missing[:40]}"


def test_the_catalogue_names_only_what_the_schema_has() -> None:
    elements = schema_keys(create_schema()._schema)
    assert sorted(set(DESCRIPTIONS) - set(elements)) == []
