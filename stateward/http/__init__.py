"""HTTP plumbing around the GraphQL endpoint: the Strawberry view, context, middleware,
offline GraphiQL and health probes. Must not import `resolvers` or `persistence`.
"""
