"""Resolvers: thin glue between the schema and the runtime.

A resolver reads `info.context`, checks what the viewer may read, calls one runtime service
(or a per-request DataLoader, `loaders`) and returns what it got: records
(`stateward.records`), domain values, or a `paging.Page` of them. It never builds a schema
type; the schema wraps the result. No SQL and no rules here. Relay ids (`ids`) and
pagination (`paging`) live here so both the schema and the resolvers can use them.

May import `stateward.runtime`, `stateward.records`, `stateward.domain` and, for the API's
error type only, `stateward.schema.errors`; never another schema module, never
`stateward.persistence`.
"""
