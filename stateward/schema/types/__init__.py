"""Strawberry object types of the public contract (DESIGN §10), one small module per area.

Each type maps from a domain value or a read-model record (`stateward.records`) through a
`from_domain` / `from_record` constructor; nested fields call `stateward.resolvers` and wrap
what they return.
"""
