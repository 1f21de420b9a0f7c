"""The GraphQL schema: Strawberry types, inputs, enums, scalars and the Schema object.

Owns the public GraphQL contract (DESIGN §10). Imports `runtime` only through resolvers;
never imports persistence directly. `base.build_schema` is the one way to build a schema.
"""
