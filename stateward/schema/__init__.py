"""The GraphQL schema: Strawberry types, inputs, enums, scalars and the Schema object.

Owns the public GraphQL contract (DESIGN §10): `root.create_schema(settings)` is the served
schema (`query.py`, `mutation.py`, `subscription.py`, `types/`). Field resolvers delegate to
`stateward.resolvers`; types import persistence only for its frozen record dataclasses
(their `from_record` constructors), never a repository or a session. `base.build_schema` is
the one way to build a schema.
"""
