"""Resolvers: thin glue between the schema and the runtime.

A resolver reads `info.context`, calls one runtime service (or a per-request DataLoader)
and maps the result with a type's `from_domain`/`from_record` constructor. No SQL and no
rules here. May import `stateward.runtime` and `stateward.schema`; never persistence
repositories directly (loaders go through the runtime's unit of work factory).
"""
