"""The GraphQL schema: Strawberry types, inputs, enums, scalars and the Schema object.

Owns the public GraphQL contract (DESIGN §10): `root.create_schema(settings)` is the served
schema (`query.py`, `mutation.py`, `subscription.py`, `types/`). Fields call
`stateward.resolvers`, which return records, domain values or pages of them; the types
wrap those (`from_record`/`from_domain`, `Connection.of`). The arrow runs one way: the
schema imports the resolvers, never the reverse (only `errors.ApiError` is shared). Record
types come from `stateward.records`, never from `stateward.persistence`. `base.build_schema`
is the one way to build a schema.
"""
